"""Per-op total time against XProf's own ``hlo_stats`` tool, on every TPU trace of the corpus.

XProf times a TPU op by the device's clock (``device_offset_ps`` / ``device_duration_ps``), as
profan does; its ``total_time`` (us) sums an op's executions over every device.  Each op's
total must agree within 1%.  XProf writes caches next to its input: it runs on a private copy.
(The GPU side is not checked here: XProf counts kernels, not executions, merges ops of one
name across programs and leaves kernels inside command buffers unattributed.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import profan

TPU_TRACES = ("tpu_v6e_inference",)  # the corpus's only TPU trace file
TOLERANCE = 0.01


def xprof_hlo_stats(trace: Path, workdir: Path) -> dict[tuple[str, str], float]:
    """(program id, op) -> total time in seconds, from XProf's hlo_stats on a private copy."""
    from xprof.convert import raw_to_tool_data

    copy = workdir / trace.name
    shutil.copyfile(trace, copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "hlo_stats", {})
    table = json.loads(data)
    table = table[0] if isinstance(table, list) else table
    columns = [column["id"] for column in table["cols"]]
    totals: dict[tuple[str, str], float] = {}
    for row in table["rows"]:
        cells = [cell.get("v") if isinstance(cell, dict) else cell for cell in row["c"]]
        record = dict(zip(columns, cells, strict=True))
        key = (str(record["program_id"]), str(record["hlo_op_name"]))
        totals[key] = totals.get(key, 0.0) + float(record["total_time"]) * 1e-6
    return totals


@pytest.mark.parametrize("name", TPU_TRACES)
def test_every_tpu_op_total_matches_xprof(name: str, corpus_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("xprof", reason="xprof not installed (pip install '.[xprof]')")
    trace = corpus_dir / "traces" / f"{name}.xplane.pb"
    if not trace.exists():
        pytest.skip(f"{trace} is not there")
    theirs = xprof_hlo_stats(trace, tmp_path)
    profile = profan.load(str(trace), use_cache=False)
    program = profile.ops["program_id"].astype(str)
    ours = profile.ops.groupby([program, profile.ops["op_name"]])["duration_s"].sum()
    assert len(theirs) >= 15
    assert set(theirs) == {(str(p), str(o)) for p, o in ours.index}
    for (program_id, op), seconds in theirs.items():
        mine = float(ours.loc[(program_id, op)])
        assert mine == pytest.approx(seconds, rel=TOLERANCE, abs=1e-9), (program_id, op)
    # the regression of issue 25: the host timeline's 2.96 s, the device's 3.19 s
    fusion = [s for (_, op), s in theirs.items() if op == "broadcast_add_fusion"]
    assert fusion and round(fusion[0], 2) == 3.19
