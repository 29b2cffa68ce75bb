"""``Exportable``: a profile analysed as ``profan report`` analyses it, with profan's figures for
every execution and the host files its events are read from again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from profan.errors import TraceError
from profan.export.events import HostRows, Matcher, Origin
from profan.export.figures import Figures, figures_of
from profan.report.build import Analysis, build_report
from profan.report.config import RuleConfig
from profan.report.model import Report
from profan.report.pipeline import Progress, analyse, resolve_layout
from profan.trace.discover import Run, find_run
from profan.trace.storage import RemotePath


@dataclass(slots=True)
class Exportable:
    """A profile, its report and figures, and the run it was read from."""

    analysis: Analysis
    report: Report
    figures: Figures
    efficiencies: np.ndarray  # per row of Profile.ops: Figures.execution_efficiencies()
    run: Run
    used: np.ndarray  # per row of Profile.ops: joined to an event already
    origin: Origin

    @property
    def hosts(self) -> list[tuple[str, Path | RemotePath, str]]:
        """(host, file, format) of every host of the run, in host order."""
        return [
            (host, file, self.run.formats[host]) for host, file in sorted(self.run.files.items())
        ]

    def matcher(self, host: str) -> Matcher:
        """The joiner of one host's events to its executions (each host once)."""
        return Matcher(HostRows.of(self.analysis.profile.ops, host, self.used), self.origin)

    def unjoined_rows(self) -> int:
        """Executions no event was joined to (after every host was read)."""
        return int((~self.used).sum())


def exportable(
    path: str,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    config: RuleConfig | None = None,
    progress: Progress | None = None,
) -> Exportable:
    """Analyse ``path`` as ``profan report`` does and prepare its export."""
    progress = progress or Progress(False)
    analysis = analyse(path, chip=chip, hlo=hlo, run=run, progress=progress)
    progress("building the report")
    report = build_report(analysis, config)
    trace_path, _ = resolve_layout(path, hlo)
    found = find_run(trace_path, run)
    profile = analysis.profile
    read = set(profile.ops["host"].astype(object).unique())
    missing = sorted(set(found.files) - read)
    if missing:
        raise TraceError(
            str(path),
            f"profan read this pod reduced (its files exceed what is read whole), so no per-event"
            f" table exists for {len(missing)} of its {len(found.files)} hosts "
            f"({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}); export them one "
            "host at a time: profan export RUN_DIR/HOST.xplane.pb --output …",
        )
    figures = figures_of(analysis, report)
    return Exportable(
        analysis=analysis,
        report=report,
        figures=figures,
        efficiencies=figures.execution_efficiencies(),
        run=found,
        used=np.zeros(len(profile.ops), dtype=bool),
        origin=Origin(profile.origin_ns),
    )
