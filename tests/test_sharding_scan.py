"""Layers under ``jax.lax.scan``: the matmul sits in a while body, fed by the loop tuple.

The module is ``fixtures/scan_layers/hlo/*after_optimizations.txt``: XLA's dump (jax/jaxlib
0.10.2, CPU, 8 virtual devices) of ``build_scan_layers`` in ``fixtures/make_fixtures.py``::

    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
    def forward(ws, x):
        def layer(h, w):
            return jnp.maximum(h @ w, 0), None
        h, _ = jax.lax.scan(layer, x, ws)
        return h
    w_sharding = NamedSharding(mesh, P(None, None, "model"))
    x_sharding = NamedSharding(mesh, P("data", None))
    jax.jit(forward, in_shardings=(w_sharding, x_sharding))  # ws [3, 64, 64], x [32, 64]
"""

from __future__ import annotations

import json

from profan.hlo.model import Module
from profan.hlo.parser import parse_module
from profan.sharding import describe
from tests.conftest import FIXTURES_DIR

SCAN_DIR = FIXTURES_DIR / "scan_layers"


def _scan_module() -> Module:
    meta = json.loads((SCAN_DIR / "meta.json").read_text())
    path = SCAN_DIR / meta["hlo_files"][0]["file"]
    assert path.name.endswith("after_optimizations.txt"), path
    return parse_module(path.read_text(), file=str(path))


def test_the_fixture_is_the_program_described_here() -> None:
    meta = json.loads((SCAN_DIR / "meta.json").read_text())
    assert meta["mesh"]["axis_names"] == ["data", "model"]
    assert meta["mesh"]["axis_sizes"] == [4, 2]
    assert [i["shape"] for i in meta["inputs"]] == [[3, 64, 64], [32, 64]]
    assert meta["truth"]["while_trip_count"] == 3


def test_matmul_in_while_body_gets_global_shapes() -> None:
    report = describe(_scan_module())
    assert report.mesh.shape == {"axis0": 4, "axis1": 2}
    (matmul,) = report.matmuls
    # h [32, 64] (batch split 4 ways on data) @ w [64, 64] (columns split 2 ways on model).
    assert matmul.local_lhs == [8, 64] and matmul.local_rhs == [64, 32]
    assert matmul.global_lhs == [32, 64] and matmul.global_rhs == [64, 64]
    assert matmul.global_out == [32, 64]
    labels = {(s.strategy, tuple(s.axes)) for s in report.strategies}
    assert ("data parallel", ("axis0",)) in labels
    assert ("tensor parallel (column split)", ("axis1",)) in labels
    # The activation gathered over model between layers is not mistaken for an FSDP weight.
    assert not any(strategy.startswith("FSDP") for strategy, _ in labels)
