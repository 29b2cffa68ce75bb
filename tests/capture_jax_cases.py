"""profan.capture on real JAX programs (CPU, 8 virtual devices): compile and warm up outside
the trace, profile, analyse; numbers checked against XLA's own cost analysis.

Not collected by the suite itself: tests/test_capture_jax.py runs this file in a child pytest
process (JAX's runtime threads must not live in the suite's process, which forks later)."""

from __future__ import annotations

import inspect
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip(
    "jax", reason="jax is not installed: pip install -e '.[jax,test]' to run the capture tests"
)

from profan.capture import Capture, CaptureError, CaptureWarning, capture  # noqa: E402
from profan.report.analysis.pipeline import report_for  # noqa: E402
from profan.report.model import Report  # noqa: E402

DEVICES = 8


@pytest.fixture(scope="module")
def jnp() -> Any:
    """jax.numpy with 8 CPU devices: XLA_FLAGS is read once, when the first backend starts."""
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        flags = os.environ.get("XLA_FLAGS", "")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XLA_FLAGS", f"{flags} --xla_force_host_platform_device_count={DEVICES}")
            jax.devices()
    if jax.device_count() != DEVICES or jax.default_backend() != "cpu":
        pytest.skip(f"needs {DEVICES} CPU devices; jax started with {jax.devices()}")
    return jax.numpy


def _line_of(fn: Any, text: str) -> int:
    """The line number of ``text`` inside ``fn``'s source (where XLA's metadata should point)."""
    lines, first = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return first + offset


def test_capture_matmul_512_reports_2n3_flops_per_execution(jnp: Any) -> None:
    f = jax.jit(lambda a, b: a @ b)
    lambda_line = inspect.currentframe().f_lineno - 1  # type: ignore[union-attr]
    a = jnp.ones((512, 512), jnp.float32)
    b = jnp.full((512, 512), 2.0, jnp.float32)
    report = capture(f, a, b, steps=3, warmup=1)

    (op,) = [op for op in report.ops if op.category == "matmul"]
    assert op.flops / op.occurrences == 2 * 512**3
    assert op.occurrences == 3  # one execution per traced step, warm-up not traced
    xla = f.lower(a, b).compile().cost_analysis()
    xla = xla[0] if isinstance(xla, list) else xla
    assert op.flops / op.occurrences == xla["flops"]  # XLA's own count agrees
    assert op.source == f"{__file__}:{lambda_line}"
    assert op.shape == "f32[512,512]"
    assert report.summary.step_count == 3
    assert report.unmatched == []
    assert report.trace.capture.traced_steps == 3
    assert report.trace.capture.compilations_in_trace == 0
    # the JSON report round-trips
    data = json.loads(json.dumps(report.to_dict()))
    assert data["trace"]["capture"]["steps"] == 3
    assert Report.from_dict(data).op(op.key).flops == op.flops


def test_capture_passes_keywords_to_fn_and_counts_steps(jnp: Any) -> None:
    @jax.jit
    def scaled(x: Any, *, scale: Any) -> Any:
        return jnp.tanh(x * scale)

    x = jnp.ones((256, 256))
    report = capture(scaled, x, scale=jnp.float32(3.0), steps=4, warmup=2)
    assert report.summary.step_count == 4
    assert {op.occurrences for op in report.ops} == {4}
    assert (
        report.trace.capture.function
        == "test_capture_passes_keywords_to_fn_and_counts_steps.<locals>.scaled"
    )


def test_capture_warmup_0_still_compiles_outside_the_trace(jnp: Any) -> None:
    f = jax.jit(lambda x: (x @ x.T).sum())
    x = jnp.ones((128, 64))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        report = capture(f, x, steps=2, warmup=0)
    assert report.trace.capture.compilations_in_trace == 0
    assert report.summary.step_count == 2


def test_capture_warns_when_the_steps_compile(jnp: Any) -> None:
    sizes = iter(range(8, 100))

    def recompiles() -> Any:  # a new shape every call: XLA compiles in every step
        return jax.jit(lambda v: v * 2)(jnp.ones(next(sizes)))

    with pytest.warns(CaptureWarning, match=r"compilation\(s\) ran inside the traced steps"):
        report = capture(recompiles, steps=2, warmup=1)
    assert report.trace.capture.compilations_in_trace >= 2


def test_context_manager_traces_only_the_chosen_steps_of_a_loop(jnp: Any) -> None:
    f = jax.jit(lambda a, b: a @ b)
    a = jnp.ones((256, 256))
    with Capture(steps=3, warmup=2) as run:
        for _ in range(7):  # 2 warm-up, 3 traced, 2 after the trace stopped
            with run.step():
                a = f(a, a) * 1e-3
    assert run.report is not None
    assert run.report.summary.step_count == 3
    (op,) = [op for op in run.report.ops if op.category == "matmul"]
    assert op.occurrences == 3
    assert run.report.trace.capture.traced_steps == 3


def test_context_manager_with_a_short_loop(jnp: Any) -> None:
    f = jax.jit(lambda a: a + 1)
    short = Capture(steps=3, warmup=1)
    with pytest.raises(CaptureError, match=r"no step was traced: the loop ran 1 step\(s\)"):  # noqa: SIM117
        with short, short.step():
            f(jnp.ones(4))
    with Capture(steps=3, warmup=1) as run:  # the loop ends after 2 traced steps
        for _ in range(3):
            with run.step():
                kept = f(jnp.ones(4))
    assert run.report is not None and run.report.summary.step_count == 2
    assert kept.shape == (4,)


def test_steps_without_device_work_are_a_clear_error(jnp: Any) -> None:
    with pytest.raises(CaptureError, match=r"no op executions in the trace.*wait for them"):  # noqa: SIM117
        with Capture(steps=2, warmup=0) as idle:
            for _ in range(2):
                with idle.step():
                    pass  # nothing dispatched to a device


def test_a_last_step_that_did_less_work_is_flagged(jnp: Any) -> None:
    f = jax.jit(lambda a, b: a @ b)
    a = jnp.ones((256, 256))
    with Capture(steps=3, warmup=1) as same:
        for _ in range(4):
            with same.step():
                f(a, a).block_until_ready()
    assert same.report is not None
    assert same.report.trace.capture.last_step_cut_short is False

    with pytest.warns(CaptureWarning, match="last traced step did less work"):  # noqa: SIM117
        with Capture(steps=3, warmup=1) as short:
            for i in range(4):
                with short.step():
                    f(a, a).block_until_ready()
                    if i < 3:  # the last step runs one matmul instead of two
                        f(a, a).block_until_ready()
    assert short.report is not None
    assert short.report.trace.capture.last_step_cut_short is True


def test_an_error_in_a_traced_step_stops_the_profiler(jnp: Any) -> None:
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("profan-capture-*"))
    calls = iter(range(10))

    def fails_in_the_second_traced_step(x: Any) -> Any:
        if next(calls) == 2:
            raise ValueError("boom")
        return x * 2

    with pytest.raises(ValueError, match="boom"):
        capture(fails_in_the_second_traced_step, jnp.ones(4), steps=3, warmup=1)
    assert set(Path(tempfile.gettempdir()).glob("profan-capture-*")) == before
    # the profiler was stopped: a new capture can start it
    assert capture(jax.jit(lambda x: x + 1), jnp.ones(4), steps=1).summary.step_count == 1


def test_trace_is_private_and_removed_unless_kept(jnp: Any, tmp_path: Path) -> None:
    import tempfile

    before = set(Path(tempfile.gettempdir()).glob("profan-capture-*"))
    f = jax.jit(lambda a: a * 2)
    x = jnp.ones(16)
    report = capture(f, x, steps=1)
    assert set(Path(tempfile.gettempdir()).glob("profan-capture-*")) == before
    assert "trace not kept" in report.trace.path

    kept = capture(f, x, steps=1, keep_trace=True)
    folder = Path(kept.trace.path)
    try:
        assert folder.is_dir() and folder.name.startswith("profan-capture-")
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert list(folder.glob("plugins/profile/*/*.xplane.pb"))
    finally:
        import shutil

        shutil.rmtree(folder)


def test_keep_trace_path_collects_runs_that_profan_report_reads(jnp: Any, tmp_path: Path) -> None:
    f = jax.jit(lambda a, b: a @ b)
    a = jnp.ones((64, 64))
    first = capture(f, a, a, steps=2, keep_trace=tmp_path / "traces")
    second = capture(f, a, a, steps=3, keep_trace=tmp_path / "traces")  # often the same second
    runs = sorted(p.name for p in (tmp_path / "traces" / "plugins" / "profile").iterdir())
    assert runs == sorted([first.trace.run, second.trace.run])
    again = report_for(tmp_path / "traces", run=second.trace.run)
    assert again.summary.step_count == 3
    assert [(op.key, op.flops) for op in again.ops] == [(op.key, op.flops) for op in second.ops]


def test_a_running_profiler_is_a_clear_error(jnp: Any, tmp_path: Path) -> None:
    jax.profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(CaptureError, match="another trace running"):
            capture(jax.jit(lambda a: a + 1), jnp.ones(4), steps=1)
    finally:
        jax.profiler.stop_trace()
    # the capture released everything: the next one works
    assert capture(jax.jit(lambda a: a + 1), jnp.ones(4), steps=1).summary.step_count == 1


def test_bad_arguments() -> None:
    with pytest.raises(CaptureError, match="steps must be a positive integer"):
        Capture(steps=0)
    with pytest.raises(CaptureError, match="warmup must be an integer >= 0"):
        Capture(warmup=-1)
    with pytest.raises(CaptureError, match="outside"), Capture().step():
        pass


def test_program_meshes_name_the_axes_of_a_loop(jnp: Any) -> None:
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from profan.capture import program_meshes

    mesh = Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("pipe", "fsdp", "tensor"))
    x = jax.device_put(jnp.ones((64, 64)), NamedSharding(mesh, P(("pipe", "fsdp"), "tensor")))

    @jax.jit
    def total(v: Any) -> Any:
        return v.sum()

    meshes = program_meshes(total, x)
    assert list(meshes) == ["jit_total"]
    (found,) = meshes.values()
    assert found.spec.axis_names == ("pipe", "fsdp", "tensor")
    assert found.spec.axis_sizes == (2, 2, 2)
    assert program_meshes(lambda v: v.sum(), x) == {}  # not jitted: nothing to lower
    assert program_meshes(total, jnp.ones(4)) == {}  # one device: the program names no mesh

    with Capture(steps=2, warmup=1, program_meshes=meshes) as run:
        for _ in range(3):
            with run.step():
                result = total(x)  # kept: the step waits for the live arrays
    assert run.report is not None
    assert list(run.report.summary.mesh.values()) == [{"pipe": 2, "fsdp": 2, "tensor": 2}]
    axes = sorted(tuple(op.collective["axes"]) for op in run.report.ops if op.collective)
    assert axes == [("pipe", "fsdp"), ("tensor",)]  # the sum over each sharded dim

    with Capture(steps=2, warmup=1) as unnamed:  # without: XLA's groups, generated names
        for _ in range(3):
            with unnamed.step():
                result = total(x)
    assert unnamed.report is not None
    assert list(unnamed.report.summary.mesh.values()) == [{"axis0": 4, "axis1": 2}]
    assert float(result) == 64 * 64


def test_capture_sharded_program_on_8_devices(jnp: Any) -> None:
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    # devices in a transposed order: the program's logical ids are not the device ids
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4).T, ("data", "model"))

    def mlp(x: Any, w1: Any, w2: Any) -> Any:
        hidden = jax.nn.relu(x @ w1)
        return hidden @ w2

    def put(shape: tuple[int, int], *spec: str | None) -> Any:
        return jax.device_put(jnp.ones(shape), NamedSharding(mesh, P(*spec)))

    args = (put((64, 128), "data", None), put((128, 256), None, "model"), put((256, 128), "model"))
    f = jax.jit(mlp)
    report = capture(f, *args, steps=3)

    assert report.device.count == DEVICES
    # the program's own axis names (read from the program JAX lowered), not axis0/axis1
    assert list(report.summary.mesh.values()) == [{"data": 4, "model": 2}]
    (reduce,) = [op for op in report.ops if op.category == "collective"]
    assert reduce.opcode == "all-reduce"
    assert reduce.collective["group_size"] == 2
    assert reduce.collective["axes"] == ["model"]  # h @ w2 contracts the model-split dim
    assert reduce.source == f"{__file__}:{_line_of(mlp, 'hidden @ w2')}"
    # FLOPs per device and step equal XLA's cost analysis of the partitioned program
    xla = f.lower(*args).compile().cost_analysis()
    xla = xla[0] if isinstance(xla, list) else xla
    per_device_step = sum(op.flops for op in report.ops) / (3 * DEVICES)
    assert per_device_step == pytest.approx(xla["flops"], rel=1e-6)
