"""profan.load on real traces: the corpus (TPU v6e, MI300X) and the project's CPU fixtures.

Counts are checked against an independent decode of the same files with plain protobuf message
objects (``_full_space``), or against the fixture generator's own inspection (``meta.json``).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import profan
from profan.errors import TraceError
from profan.trace.profile import OP_COLUMNS
from profan.trace.schema import load_schema

FIXTURES = ("matmul", "mlp", "mlp_worse", "collectives", "transformer")


pytestmark = pytest.mark.usefixtures("private_cache")


def _full_space(path: Path):  # the plain, one-object-per-event decode
    return load_schema("xplane.proto")["tensorflow.profiler.XSpace"].FromString(path.read_bytes())


def _stat_names(plane) -> dict[int, str]:
    return {key: meta.name for key, meta in plane.stat_metadata.items()}


def _accounted(profile: profan.trace.Profile) -> None:
    """Every op row is either joined or counted under an unmatched reason."""
    rows = len(profile.ops) + (0 if profile.async_ops is None else len(profile.async_ops))
    joined = int(profile.ops["matched"].sum())
    if profile.async_ops is not None:
        joined += int(profile.async_ops["matched"].sum())
    assert joined + profile.unmatched_count == rows


# ------------------------------------------------------------------------------- TPU


@pytest.fixture(scope="module")
def tpu_path(corpus_dir: Path) -> Path:
    return corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"


@pytest.fixture(scope="module")
def tpu(tpu_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[profan.trace.Profile]:
    with pytest.MonkeyPatch.context() as patch:  # restored after the module's tests
        patch.setenv("PROFAN_CACHE_DIR", str(tmp_path_factory.mktemp("tpu-cache")))
        yield profan.load(str(tpu_path))


def test_tpu_columns_and_device(tpu: profan.trace.Profile, tpu_path: Path) -> None:
    assert tuple(tpu.ops.columns[: len(OP_COLUMNS)]) == OP_COLUMNS
    space = _full_space(tpu_path)
    planes = [p for p in space.planes if p.name.startswith("/device:TPU:")]
    assert tpu.device.kind == "TPU"
    assert tpu.device.count == len(planes)
    first = {_stat_names(planes[0])[s.metadata_id]: s for s in planes[0].stats}
    assert tpu.device.type_string == first["device_type_string"].str_value
    assert tpu.device.peak_flops_per_s == pytest.approx(
        first["peak_teraflops_per_second"].double_value * 1e12
    )
    assert tpu.device.peak_hbm_bytes_per_s == pytest.approx(
        first["peak_hbm_bw_gigabytes_per_second"].double_value * 1e9
    )
    assert sorted(tpu.ops["device"].unique()) == list(range(len(planes)))


def test_tpu_every_xla_ops_event_is_a_row_and_99_percent_join(
    tpu: profan.trace.Profile, tpu_path: Path
) -> None:
    # An op's time is the device's own clock (device_duration_ps) where the event holds both
    # device stats, as XProf reads it (profan.trace.device_clock), else the event's duration.
    space = _full_space(tpu_path)
    expected = {}
    for plane in space.planes:
        if plane.name.startswith("/device:TPU:"):
            ordinal = int(plane.name.rsplit(":", 1)[1])
            names = _stat_names(plane)
            line = next(line for line in plane.lines if line.name == "XLA Ops")
            total = 0
            for event in line.events:
                stats = {names[s.metadata_id]: s for s in event.stats}
                device = [stats.get(f"device_{k}_ps") for k in ("offset", "duration")]
                values = [getattr(s, s.WhichOneof("value")) if s else None for s in device]
                on_device = all(isinstance(v, int) and v >= 0 for v in values)
                total += values[1] if on_device else event.duration_ps
            expected[ordinal] = (len(line.events), total)
    per_device = tpu.ops.groupby("device").agg(n=("op_name", "size"), t=("duration_s", "sum"))
    for ordinal, (count, duration_ps) in expected.items():
        assert per_device.loc[ordinal, "n"] == count
        assert per_device.loc[ordinal, "t"] == pytest.approx(duration_ps / 1e12)
    assert tpu.ops["matched"].mean() >= 0.99
    _accounted(tpu)


def test_tpu_trace_flops_come_from_event_metadata(
    tpu: profan.trace.Profile, tpu_path: Path
) -> None:
    # Independent: sum the metadata's flops stat over every XLA Ops event of device 0.
    plane = next(p for p in _full_space(tpu_path).planes if p.name == "/device:TPU:0")
    names = _stat_names(plane)
    line = next(line for line in plane.lines if line.name == "XLA Ops")
    total = 0
    for event in line.events:
        meta = plane.event_metadata[event.metadata_id]
        for s in meta.stats:
            if names[s.metadata_id] == "flops":
                total += getattr(s, s.WhichOneof("value"))
    ours = tpu.ops.loc[tpu.ops["device"] == 0, "trace_flops"].fillna(0).sum()
    assert total > 0
    assert ours == pytest.approx(total)


def test_tpu_joined_instruction_is_the_named_op(tpu: profan.trace.Profile) -> None:
    for row in tpu.ops.drop_duplicates(["module_key", "op_name"]).itertuples():
        instruction = tpu.instruction(row.module_key, row.op_name)
        assert instruction is not None and instruction.name == row.op_name
    # the program id in the key is the event's own program id
    keys = tpu.ops["module_key"].astype(str) + "|" + tpu.ops["program_id"].astype(str)
    assert all(k.split("|")[0].endswith(f"({k.split('|')[1]})") for k in keys.unique())


def test_tpu_async_spans_kept_apart(tpu: profan.trace.Profile, tpu_path: Path) -> None:
    plane = next(p for p in _full_space(tpu_path).planes if p.name == "/device:TPU:0")
    line = next(line for line in plane.lines if line.name == "Async XLA Ops")
    assert tpu.async_ops is not None
    assert (tpu.async_ops["device"] == 0).sum() == len(line.events)
    assert tpu.async_ops["matched"].all()
    assert set(tpu.async_ops["op_name"]) <= set(tpu.ops["op_name"])


def test_tpu_steps_from_dominant_module(tpu: profan.trace.Profile, tpu_path: Path) -> None:
    # No Steps line in this trace: one step per XLA Modules execution of the busiest module.
    plane = next(p for p in _full_space(tpu_path).planes if p.name == "/device:TPU:0")
    line = next(line for line in plane.lines if line.name == "XLA Modules")
    names = [plane.event_metadata[e.metadata_id].name for e in line.events]
    dominant = max(set(names), key=names.count)
    assert len(tpu.steps) == names.count(dominant)
    assert tpu.steps["step"].tolist() == list(range(len(tpu.steps)))
    assert (tpu.steps["duration_s"] > 0).all()
    in_dominant = tpu.ops[tpu.ops["module"] == dominant.split("(")[0]]
    assert in_dominant["step"].notna().all()


# ------------------------------------------------------------------------------- GPU


@pytest.mark.parametrize("name", ["mi300x_jax_conv", "mi300x_jax_conv_legacy"])
def test_gpu_kernels_aggregated_per_op(corpus_dir: Path, name: str) -> None:
    path = corpus_dir / "traces" / f"{name}.xplane.pb"
    profile = profan.load(str(path))
    assert profile.device.kind == "GPU"
    kernels = 0
    kernel_ps = 0
    for plane in _full_space(path).planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        names = _stat_names(plane)
        for line in plane.lines:
            for event in line.events:
                if any(names.get(s.metadata_id) == "hlo_op" for s in event.stats):
                    kernels += 1
                    kernel_ps += event.duration_ps
    assert kernels > 0
    assert int(profile.ops["kernel_count"].sum()) == kernels
    assert profile.ops["duration_s"].sum() == pytest.approx(kernel_ps / 1e12)
    assert (profile.ops["kernel_count"] > 1).any()  # the convolution launches several kernels
    assert profile.ops["matched"].all()
    _accounted(profile)
    assert profile.device.stats.get("compute_cap_major") is not None


# ------------------------------------------------------------------------------- CPU


@pytest.mark.parametrize("name", FIXTURES)
def test_cpu_fixture(fixtures_dir: Path, name: str) -> None:
    meta = json.loads((fixtures_dir / name / "meta.json").read_text())
    observed = meta["trace"]["observed"]
    profile = profan.load(str(fixtures_dir / name / "trace"))
    assert profile.device.kind == "CPU"
    assert len(profile.ops) == observed["op_events"]
    assert profile.ops["duration_s"].sum() == pytest.approx(observed["op_duration_ps_total"] / 1e12)
    assert profile.ops["run_id"].nunique() == observed["run_ids"]
    assert profile.ops.groupby(["run_id", "device"]).ngroups == observed["executions"]
    assert sorted(profile.ops["device"].unique()) == observed["device_ordinals"]
    assert sorted(profile.ops["module"].unique()) == observed["hlo_modules"]
    assert profile.ops["matched"].all()
    _accounted(profile)
    assert len(profile.steps) == meta["trace"]["steps"]
    assert profile.ops["step"].notna().all()
    # one execution (run_id, device) never straddles two steps
    assert (profile.ops.groupby(["run_id", "device"])["step"].nunique() == 1).all()
    if meta["trace"]["step_trace_annotation"]:
        expected = [e["duration_ps"] / 1e12 for e in observed["step_events"]]
        assert profile.steps["duration_s"].tolist() == pytest.approx(expected)
    else:
        assert any("dominant module" in note for note in profile.notes)


def test_cpu_with_dump_dir_joins_by_module_name(fixtures_dir: Path) -> None:
    profile = profan.load(
        str(fixtures_dir / "mlp" / "trace"), hlo=str(fixtures_dir / "mlp" / "hlo")
    )
    assert list(profile.modules) == ["jit_train_step"]
    assert profile.ops["matched"].all()
    assert set(profile.ops["module_key"]) == {"jit_train_step"}


def test_json_only_trace_needs_hlo(fixtures_dir: Path, tmp_path: Path) -> None:
    source = next((fixtures_dir / "mlp" / "trace").rglob("*.trace.json.gz"))
    shutil.copy(source, tmp_path / source.name)
    alone = profan.load(str(tmp_path))
    assert len(alone.ops) > 0
    assert not alone.ops["matched"].any()
    assert alone.unmatched_count == len(alone.ops)
    joined = profan.load(str(tmp_path), hlo=str(fixtures_dir / "mlp" / "hlo"))
    assert joined.ops["matched"].all()
    xplane = profan.load(str(fixtures_dir / "mlp" / "trace"))
    assert len(joined.ops) == len(xplane.ops)


# ------------------------------------------------------------------- discovery, hosts


def _copy_run(fixtures_dir: Path, name: str, target: Path) -> Path:
    run = next((fixtures_dir / name / "trace" / "plugins" / "profile").iterdir())
    shutil.copytree(run, target)
    return target


def test_newest_run_by_default_and_run_by_name(fixtures_dir: Path, tmp_path: Path) -> None:
    runs = tmp_path / "log" / "plugins" / "profile"
    _copy_run(fixtures_dir, "matmul", runs / "2024_01_01_00_00_00")
    _copy_run(fixtures_dir, "mlp", runs / "2025_01_01_00_00_00")
    newest = profan.load(str(tmp_path / "log"))
    assert newest.run == "2025_01_01_00_00_00"
    assert set(newest.ops["module"]) == {"jit_train_step"}
    older = profan.load(str(runs), run="2024_01_01_00_00_00")
    assert set(older.ops["module"]) == {"jit_matmul"}
    run_dir = profan.load(str(runs / "2024_01_01_00_00_00"))
    assert len(run_dir.ops) == len(older.ops)
    with pytest.raises(TraceError, match="no run named"):
        profan.load(str(tmp_path / "log"), run="nope")


def test_xplane_preferred_over_json(fixtures_dir: Path) -> None:
    profile = profan.load(str(fixtures_dir / "matmul" / "trace"))
    assert any("trace.json.gz" in note and "xplane" in note for note in profile.notes)


@pytest.mark.slow
def test_many_hosts_load_in_parallel(fixtures_dir: Path, tmp_path: Path) -> None:
    run = next((fixtures_dir / "collectives" / "trace" / "plugins" / "profile").iterdir())
    xplane = next(run.glob("*.xplane.pb"))
    target = tmp_path / "plugins" / "profile" / "run1"
    target.mkdir(parents=True)
    for host in ("host-a", "host-b"):
        shutil.copy(xplane, target / f"{host}.xplane.pb")
    single = profan.load(str(xplane))
    merged = profan.load(str(tmp_path), workers=2)
    assert sorted(merged.ops["host"].unique()) == ["host-a", "host-b"]
    assert len(merged.ops) == 2 * len(single.ops)
    assert merged.device.hosts == ["host-a", "host-b"]
    per_host = merged.ops.groupby("host")["duration_s"].sum()
    assert per_host.tolist() == pytest.approx([single.ops["duration_s"].sum()] * 2)


def test_nothing_written_near_a_read_only_trace(fixtures_dir: Path, tmp_path: Path) -> None:
    logdir = tmp_path / "ro"
    shutil.copytree(fixtures_dir / "transformer" / "trace", logdir)
    before = sorted(str(p) for p in logdir.rglob("*"))
    paths = [logdir, *logdir.rglob("*")]
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        profile = profan.load(str(logdir))
        assert profile.ops["matched"].all()
        after = sorted(str(p) for p in logdir.rglob("*"))
        assert after == before
        cache = Path(os.environ["PROFAN_CACHE_DIR"])
        assert list(cache.glob("profiles/*.entry"))  # the profile was cached there instead
    finally:
        for path in paths:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)


def test_cached_modules_equal_fresh_ones(fixtures_dir: Path) -> None:
    path = str(fixtures_dir / "collectives" / "trace")
    fresh = profan.load(path, use_cache=False)
    first = profan.load(path)
    cached = profan.load(path)
    for key, module in fresh.modules.items():
        assert cached.modules[key] == module == first.modules[key]
    assert np.array_equal(cached.ops["matched"], fresh.ops["matched"])


def test_hlo_dir_and_single_file_override_embedded(corpus_dir: Path) -> None:
    trace = corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"
    texts = corpus_dir / "traces" / "tpu_v6e_inference.hlo"
    from_dir = profan.load(str(trace), hlo=str(texts))
    assert sorted(from_dir.modules) == [
        "jit__psum",
        "jit_broadcast_in_dim",
        "jit_convert_element_type",
        "jit_f",
    ]
    assert from_dir.ops["matched"].all()
    one = next(texts.glob("jit_f(*"))
    mixed = profan.load(str(trace), hlo=str(one))
    assert "jit_f" in mixed.modules  # from the file
    assert any(key.startswith("jit__psum(") for key in mixed.modules)  # embedded for the rest
    assert mixed.ops["matched"].all()
    assert set(mixed.ops.loc[mixed.ops["module"] == "jit_f", "module_key"]) == {"jit_f"}


def test_ops_table_has_the_declared_dtypes(fixtures_dir: Path) -> None:
    from profan.trace import OP_DTYPES

    for name in ("transformer", "gpu_kernels"):
        profile = profan.load(fixtures_dir / name / "trace")
        assert list(profile.ops.columns) == list(OP_DTYPES)
        assert {c: str(t) for c, t in profile.ops.dtypes.items()} == OP_DTYPES
        assert profile.ops["op_name"].cat.categories.is_unique


def test_load_options_object_and_keywords(fixtures_dir: Path) -> None:
    from profan.trace import LoadOptions

    trace = fixtures_dir / "matmul" / "trace"
    by_object = profan.load(trace, options=LoadOptions(workers=1, use_cache=False))
    by_keyword = profan.load(trace, workers=1, use_cache=False)
    pd.testing.assert_frame_equal(by_object.ops, by_keyword.ops)
    with pytest.raises(TypeError, match=r"unknown load option.*wrkers"):
        profan.load(trace, wrkers=1)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        LoadOptions(workers=0)
