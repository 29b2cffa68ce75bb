"""Steps and MFU of traces without step marks that ran several programs (profan.trace.steps).

The MI300X corpus traces ``mi300x_jax08_gemm`` and ``mi300x_jax08_attention`` carry no step
annotation and ran many programs one after another (six ``jit_dot`` programs of one name and
different shapes; 22 attention pieces), each a few times, on GPU 0 only.  No program's
executions are the trace's steps there: the one step is the whole busy span, and MFU is over the
devices that ran kernels.  Every figure is checked against the kernels read here with protobuf
(``fixtures/inspect_xplane.py``), the FLOPs against the report's per-op FLOPs and the peak
against the chip catalogue.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import profan
from tests.conftest import REPO_ROOT
from tests.raw_xplane import raw_kernels

SEVERAL_PROGRAMS = ["mi300x_jax08_gemm", "mi300x_jax08_attention"]


@dataclass
class Kernels:
    """The kernels of one trace (events on GPU planes that carry ``hlo_op``), read raw."""

    planes: int = 0  # /device:GPU:N planes in the file
    # device -> [(start_ps, end_ps)], on the trace's absolute clock
    spans: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    # program id -> (module name, kernel time in ps)
    programs: dict[int, tuple[str, int]] = field(default_factory=dict)
    # every kernel: (program id, start_ps, end_ps)
    kernels: list[tuple[int, int, int]] = field(default_factory=list)

    def first_start(self) -> int:
        return min(start for spans in self.spans.values() for start, _ in spans)

    def span(self, device: int) -> int:
        mine = self.spans[device]
        return max(end for _, end in mine) - min(start for start, _ in mine)


@cache
def _kernels(path: str) -> Kernels:
    raw = raw_kernels(path)
    found = Kernels(planes=raw.planes)
    time_of: dict[int, int] = defaultdict(int)
    name_of: dict[int, str] = {}
    for event in raw.kernels:
        start, end = event.start_ps, event.start_ps + event.duration_ps
        found.spans[event.device].append((start, end))
        program = int(event.stats["program_id"])
        found.kernels.append((program, start, end))
        time_of[program] += event.duration_ps
        name_of[program] = str(event.stats["hlo_module"])
    found.programs = {p: (name_of[p], time_of[p]) for p in time_of}
    return found


@cache
def _report(path: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "profan", "report", path, "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _bf16_peak(chip: str) -> float:
    catalogue = tomllib.loads((REPO_ROOT / "profan" / "data" / "chips.toml").read_text())
    return float(catalogue["chips"][chip]["peak_flops"]["bf16"])


def _trace(corpus_dir: Path, name: str) -> str:
    return str(corpus_dir / "traces" / f"{name}.xplane.pb")


@pytest.mark.parametrize("name", SEVERAL_PROGRAMS)
def test_one_step_over_the_whole_busy_span(corpus_dir: Path, name: str) -> None:
    path = _trace(corpus_dir, name)
    kernels = _kernels(path)
    assert list(kernels.spans) == [0]  # only GPU 0 ran kernels
    report = _report(path)
    steps = report["steps"]
    assert len(steps) == 1 and report["summary"]["step_count"] == 1
    (step,) = steps
    span_s = kernels.span(0) / 1e12
    first = kernels.first_start()
    last = max(end for _, end in kernels.spans[0])
    # the window: the first kernel's start to the last kernel's end (times since the first op)
    assert step["start_s"] == pytest.approx(0.0, abs=1e-12)
    assert step["end_s"] == pytest.approx((last - first) / 1e12, rel=1e-9)
    assert step["measured_s"] == pytest.approx(span_s, rel=1e-9)
    assert report["summary"]["step_time_median_s"] == pytest.approx(span_s, rel=1e-9)
    assert step["devices"] == 1


@pytest.mark.parametrize("name", SEVERAL_PROGRAMS)
def test_mfu_is_the_flops_over_the_busy_span_of_the_devices_that_ran(
    corpus_dir: Path, name: str
) -> None:
    path = _trace(corpus_dir, name)
    kernels = _kernels(path)
    report = _report(path)
    flops = sum(op["flops"] for op in report["ops"] if op.get("flops") is not None)
    assert flops > 0
    ran = len(kernels.spans)
    expected = flops / (_bf16_peak("mi300x") * ran * kernels.span(0) / 1e12)
    assert 0 < expected < 1
    assert report["summary"]["mfu"] == pytest.approx(expected, rel=1e-6)
    assert report["steps"][0]["mfu"] == pytest.approx(expected, rel=1e-6)
    # where the MFU is shown, the steps say which devices it is over
    note = report["steps"][0]["note"]
    assert kernels.planes == 8
    assert (
        f"MFU is over the {ran} device that ran ops; {kernels.planes - ran} of the trace's "
        f"{kernels.planes} devices ran none"
    ) in note


@pytest.mark.parametrize("name", SEVERAL_PROGRAMS)
def test_the_note_names_the_rule_and_the_busiest_program_by_id(corpus_dir: Path, name: str) -> None:
    path = _trace(corpus_dir, name)
    kernels = _kernels(path)
    busiest = max(kernels.programs, key=lambda p: kernels.programs[p][1])
    module, busy_ps = kernels.programs[busiest]
    total_ps = sum(time for _, time in kernels.programs.values())
    # programs share a module name: executions are grouped by program id, not by name
    same_name = [p for p, (m, _) in kernels.programs.items() if m == module]
    assert len(same_name) > 1
    # the kernel time that starts between the busiest program's first kernel and its last end
    mine = [(start, end) for program, start, end in kernels.kernels if program == busiest]
    first, last = min(start for start, _ in mine), max(end for _, end in mine)
    between = sum(end - start for _, start, end in kernels.kernels if first <= start < last)
    assert between / total_ps < 0.9  # much of the work runs before or after it
    note = _report(path)["steps"][0]["note"]
    assert note.startswith("steps: one window over the whole busy span")
    assert (
        f"the busiest, {module}({busiest}), holds {busy_ps / total_ps:.1%} of the op time, and "
        f"{between / total_ps:.1%} of all op time runs between the start of its first "
        "execution and the end of its last"
    ) in note


def test_gemm_programs_ran_one_after_another(corpus_dir: Path) -> None:
    """The six jit_dot programs (one name, six shapes) ran one after another: every op of the
    trace is in its one step."""
    path = _trace(corpus_dir, "mi300x_jax08_gemm")
    kernels = _kernels(path)
    dots = sorted(p for p, (m, _) in kernels.programs.items() if m == "jit_dot")
    assert dots == [5, 21, 34, 49, 64, 79]
    windows = []
    for dot in dots:
        mine = [(start, end) for program, start, end in kernels.kernels if program == dot]
        windows.append((min(start for start, _ in mine), max(end for _, end in mine)))
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(windows))
    report = _report(path)
    profile = profan.load(path)
    assert (profile.ops["step"] == 0).all()
    assert len(profile.ops) == sum(op["occurrences"] for op in report["ops"])


def test_single_program_traces_keep_a_step_per_execution(corpus_dir: Path) -> None:
    """The conv trace ran one program: its executions are the steps, and the note says so."""
    path = _trace(corpus_dir, "mi300x_jax_conv_legacy")
    kernels = _kernels(path)
    assert len(kernels.programs) == 1
    (program,) = kernels.programs
    module = kernels.programs[program][0]
    report = _report(path)
    assert len(report["steps"]) == 5
    note = report["steps"][0]["note"]
    assert note.startswith(
        f"steps: one per execution of the dominant module {module}({program}) "
        "(recurrences of the first op; 5 steps): no step markers, and it is the only program"
    )
    ran = len(kernels.spans)
    assert f"MFU is over the {ran} device that ran ops; {kernels.planes - ran} of the" in note
