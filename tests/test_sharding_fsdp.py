"""An FSDP/ZeRO-3 training step as XLA:CPU compiled it: weights gathered before use.

The module is ``fixtures/fsdp/hlo/*after_optimizations.txt``: XLA's dump (jax/jaxlib 0.10.2,
CPU, 8 virtual devices) of ``build_fsdp`` in ``fixtures/make_fixtures.py``::

    mesh = Mesh(np.array(jax.devices()).reshape(8), ("fsdp",))
    def loss(w1, w2, x):
        hid = jnp.maximum(x @ w1, 0)
        return jnp.mean((hid @ w2) ** 2)
    def step(w1, w2, x):
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x)
        return w1 - 0.01 * g1, w2 - 0.01 * g2
    ws = xs = NamedSharding(mesh, P("fsdp", None))
    # w1 [64, 128], w2 [128, 64], x [32, 64]
    jax.jit(step, in_shardings=(ws, ws, xs), out_shardings=(ws, ws))

Both weights are sharded on dim 0 over the single ``fsdp`` axis and so is the batch.
"""

from __future__ import annotations

import json
from functools import cache

from profan.hlo.model import Module
from profan.hlo.parser import parse_module
from profan.sharding import describe
from tests.conftest import FIXTURES_DIR

FSDP_DIR = FIXTURES_DIR / "fsdp"


@cache
def _fsdp_module() -> Module:
    meta = json.loads((FSDP_DIR / "meta.json").read_text())
    path = FSDP_DIR / meta["hlo_files"][0]["file"]
    assert path.name.endswith("after_optimizations.txt"), path
    return parse_module(path.read_text(), file=str(path))


def test_the_fixture_is_the_program_described_here() -> None:
    """The recorded mesh and input shardings are those the tests below rely on."""
    meta = json.loads((FSDP_DIR / "meta.json").read_text())
    assert meta["mesh"]["axis_names"] == ["fsdp"] and meta["mesh"]["axis_sizes"] == [8]
    assert [i["shape"] for i in meta["inputs"]] == [[64, 128], [128, 64], [32, 64]]
    assert all(i["sharding"]["partition_spec"][0] == "fsdp" for i in meta["inputs"])


def test_fsdp_weight_gathers_are_labelled() -> None:
    report = describe(_fsdp_module())
    assert report.mesh.shape == {"axis0": 8}
    labels = {s.strategy: s for s in report.strategies}
    fsdp = labels["FSDP/ZeRO"]
    assert fsdp.axes == ["axis0"]
    # Both weights (parameters 0 and 1, ``w1`` and ``w2``) are gathered before their matmul.
    assert any("param all-gathered" in e for e in fsdp.evidence)
    assert any("param.2 all-gathered" in e for e in fsdp.evidence)
    assert labels["data parallel"].axes == ["axis0"]
    # The batch axis is not reported as a second, model-parallel axis.
    assert "tensor parallel (column split)" not in labels


def test_fsdp_global_shapes() -> None:
    report = describe(_fsdp_module())
    by_name = {m.name: m for m in report.matmuls}
    forward1 = by_name["ynn_fusion.2"]  # x @ w1: batch split 8 ways, w1 gathered in full
    assert forward1.local_lhs == [4, 64] and forward1.global_lhs == [32, 64]
    assert forward1.global_rhs == [64, 128] and forward1.global_out == [32, 128]
    assert forward1.fed_by[0]["from_parameter"] == "param"
    gradient = by_name["dot.4"]  # h^T @ dy: contracts the split batch, all-reduced
    assert gradient.global_out == [64, 128] and gradient.partial_sum_axes == ["axis0"]
