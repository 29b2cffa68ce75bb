"""``Exportable``: a profile analysed as ``profan report`` analyses it, with profan's figures for
every execution and the host files its events are read from again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from profan.errors import TraceError
from profan.export.events import HostRows, Matcher, Origin
from profan.export.figures import Figures, figures_of, span_figures
from profan.report.analysis.build import Analysis, build_report
from profan.report.analysis.pipeline import Progress, analyse_request, reading_ahead, request_for
from profan.report.analysis.request import Request
from profan.report.model import Report
from profan.report.rules.config import RuleConfig
from profan.trace.discover import Run
from profan.trace.options import RunOptions
from profan.trace.storage import RemotePath


@dataclass(slots=True)
class Executions:
    """One table of executions — ``Profile.ops``, or a TPU's async spans
    (``Profile.async_ops``) — with each row's op, own efficiency and step, and whether an event
    of the trace was joined to it yet."""

    frame: pd.DataFrame
    figures: Figures
    efficiencies: np.ndarray  # Figures.execution_efficiencies() of the rows
    steps: np.ndarray  # int64, -1 outside any step
    used: np.ndarray  # bool

    @classmethod
    def of(cls, frame: pd.DataFrame, figures: Figures, spans: bool) -> Executions:
        return cls(
            frame=frame,
            figures=figures,
            efficiencies=figures.execution_efficiencies(spans=spans),
            steps=frame["step"].to_numpy(dtype=np.int64, na_value=-1),
            used=np.zeros(len(frame), dtype=bool),
        )

    def host_rows(self, host: str) -> HostRows:
        return HostRows.of(self.frame, host, self.used)


@dataclass(slots=True)
class Exportable:
    """A profile, its report and figures, and the run it was read from."""

    analysis: Analysis
    report: Report
    run: Run
    origin: Origin
    executions: Executions  # Profile.ops
    spans: Executions | None  # Profile.async_ops, when the profile has async spans

    @property
    def figures(self) -> Figures:
        return self.executions.figures

    @property
    def efficiencies(self) -> np.ndarray:
        return self.executions.efficiencies

    def table(self, spans: bool) -> Executions:
        """The executions a line's op events were joined to (``LineOps.spans``)."""
        return self.spans if spans and self.spans is not None else self.executions

    @property
    def hosts(self) -> list[tuple[str, Path | RemotePath, str]]:
        """(host, file, format) of every host of the run, in host order."""
        return [
            (host, file, self.run.formats[host]) for host, file in sorted(self.run.files.items())
        ]

    def matcher(self, host: str) -> Matcher:
        """The joiner of one host's events to its executions (each host once)."""
        spans = self.spans.host_rows(host) if self.spans is not None else None
        return Matcher(self.executions.host_rows(host), self.origin, spans)

    def unjoined_rows(self) -> int:
        """Executions and async spans no event was joined to (after every host was read)."""
        missing = int((~self.executions.used).sum())
        return missing + (int((~self.spans.used).sum()) if self.spans is not None else 0)


def exportable(
    source: str | Request,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    config: RuleConfig | None = None,
    progress: Progress | None = None,
    use_cache: bool = True,
) -> Exportable:
    """Analyse ``source`` (a request, or a path and these keywords) as ``profan report`` does
    and prepare its export."""
    progress = progress or Progress(False)
    if isinstance(source, Request):
        request, path = source, source.path
    else:
        options = RunOptions(use_cache=use_cache)
        request = request_for(source, hlo=hlo, run=run, chip=chip, config=config, options=options)
        path = source
    with reading_ahead(request):
        analysis = analyse_request(request, progress)
    progress("building the report")
    report = build_report(analysis, request.config)
    found = request.inputs.run
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
    spans = span_figures(analysis, figures)
    return Exportable(
        analysis=analysis,
        report=report,
        run=found,
        origin=Origin(profile.origin_ns),
        executions=Executions.of(profile.ops, figures, spans=False),
        spans=(
            Executions.of(profile.async_ops, spans, spans=True)
            if spans is not None and profile.async_ops is not None
            else None
        ),
    )
