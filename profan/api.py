"""The Python API for notebooks and scripts: ``profan.report(path)`` and ``profan.load(path)``.

``report`` takes the options of ``profan report`` (``ReportOptions``: the one place both build
a report's options from) and returns a ``Report``: the op table as a DataFrame, the summary
and findings, and the report in every format the CLI writes (``to_csv``, ``to_json``,
``to_markdown``, ``to_html``), as text or into a file.  Both accept every input the CLI does:
a trace directory (``plugins/profile/<run>``), a folder with ``trace/`` beside ``hlo/``, one
``.xplane.pb`` or ``.trace.json.gz`` file, an object-storage URL (``gs://``, ``s3://``); a
JSON report is read back.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profan.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from profan.report import model
    from profan.report.analysis.request import JsonReport, Request
    from profan.report.render.selection import OpFilter, OpOrder
    from profan.report.rules.config import RuleConfig
    from profan.trace.options import LoadOptions, RunOptions
    from profan.trace.profile import Profile

DEFAULT_TOP = 20
# Every form of input the commands that read traces take (their --help says it).
TRACE_INPUTS = (
    "the trace: a profile directory (holding plugins/profile/<run>/), a run directory, a "
    "folder with trace/ beside hlo/, an .xplane.pb or .trace.json.gz file, or the same in "
    "object storage (gs://..., s3://...)"
)
# ops the notebook view (``Report._repr_html_``) lists: a glance, not the whole table
HTML_VIEW_TOP = 10


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """The options of a report, as ``profan report`` takes them (``--chip``, ``--hlo``, ...)
    and ``profan.report(path, **options)`` does.  ``config``: a profan.toml (its ``[rules]``)
    or a ``RuleConfig``; ``chips``/``kernels``: TOML files of extra chips and custom-call
    cost models; ``workers``, ``scheduler``, ``use_cache``: how the trace is read (these five
    make the ``RunOptions`` every trace command takes: ``run_options``); ``sort``/``filter``:
    which ops are listed and how (``profan.report.render.selection``); ``top``: the ops the
    text formats list."""

    chip: str | None = None
    hlo: str | os.PathLike[str] | None = None
    run: str | None = None
    config: str | os.PathLike[str] | RuleConfig | None = None
    top: int = DEFAULT_TOP
    chips: str | os.PathLike[str] | None = None
    kernels: str | os.PathLike[str] | None = None
    workers: int | None = None
    scheduler: str | None = None
    use_cache: bool = True
    progress: bool = False
    sort: str | None = None
    filter: Sequence[str] | str = ()

    def __post_init__(self) -> None:
        if isinstance(self.top, bool) or not isinstance(self.top, int) or self.top < 1:
            raise ConfigError(f"top must be a whole number of at least 1, got {self.top!r}")
        if self.workers is not None and (isinstance(self.workers, bool) or self.workers < 1):
            raise ConfigError(f"workers must be at least 1, got {self.workers!r}")

    def filters(self) -> list[OpFilter]:
        texts = [self.filter] if isinstance(self.filter, str) else list(self.filter)
        if not texts:  # (selection imports the report model: a re-open needs neither)
            return []
        from profan.report.render.selection import parse_filter

        return [parse_filter(text) for text in texts]

    def order(self) -> OpOrder | None:
        if self.sort is None:
            return None
        from profan.report.render.selection import parse_order

        return parse_order(self.sort)

    def rule_config(self) -> RuleConfig | None:
        from profan.report.rules.config import RuleConfig, load_rule_config

        if isinstance(self.config, RuleConfig):
            return self.config
        return load_rule_config(None if self.config is None else str(self.config))

    def run_options(self) -> RunOptions:
        """``chips``, ``kernels``, ``workers``, ``scheduler`` and ``use_cache``, the
        environment's defaults (``$PROFAN_CHIPS``, ...) for those not given, as the command
        line takes them (``RunOptions.from_environment``)."""
        from profan.trace.options import RunOptions

        return RunOptions.from_environment(
            chips=self.chips,
            kernels=self.kernels,
            workers=self.workers,
            scheduler=self.scheduler,
            use_cache=self.use_cache,
        )

    def source(
        self, path: str | os.PathLike[str], options: RunOptions, *, page: bool = False
    ) -> Request | JsonReport:
        """The request for the report of ``path`` with these options (a JSON report is read
        back): ``profan.report.analysis.pipeline.source_for``."""
        from profan.report.analysis.pipeline import source_for

        return source_for(
            os.fspath(path),
            hlo=None if self.hlo is None else os.fspath(self.hlo),
            run=self.run,
            chip=self.chip,
            config=self.rule_config(),
            page=page,
            options=options,
        )


def report(path: str | os.PathLike[str], **options: Any) -> Report:
    """The report of a trace (or a JSON report read back): ``profan report PATH`` as an object.

    ``options`` are ``ReportOptions``' fields: ``chip``, ``hlo``, ``run``, ``config``,
    ``top``, ``chips``, ``kernels``, ``workers``, ``scheduler``, ``use_cache``, ``progress``,
    ``sort``, ``filter``.  The user's chip and kernel files are in force for this call only
    (each checked first: a bad file fails before any trace is read).
    """
    from profan.report.analysis.pipeline import Progress, local_path, report_of
    from profan.report.render.selection import selected

    path = local_path(path)  # a file:// URL is its local path, as on the command line
    if isinstance(options.get("hlo"), str):
        options["hlo"] = local_path(options["hlo"])
    chosen = ReportOptions(**options)
    filters, order = chosen.filters(), chosen.order()  # (a bad one fails before the trace)
    run = chosen.run_options()
    with run.in_force():
        built = report_of(chosen.source(path, run), Progress(chosen.progress))
    return Report(selected(built, filters, order), top=chosen.top, path=str(path))


def load(
    path: str | os.PathLike[str],
    *,
    hlo: str | os.PathLike[str] | None = None,
    run: str | None = None,
    options: LoadOptions | None = None,
    **fields: Any,
) -> Profile:
    """``profan.trace.load`` of any path the CLI reads: a folder with ``trace/`` beside
    ``hlo/`` reads the trace there joined to those dumps (unless ``hlo`` says otherwise)."""
    from profan.report.analysis.pipeline import local_path, resolve_layout
    from profan.trace import load as load_trace
    from profan.trace.storage import is_remote

    path, hlo = local_path(path), local_path(hlo)  # file:// URLs: as on the command line
    trace, dumps = (str(path), hlo) if is_remote(path) else resolve_layout(path, hlo)
    if dumps is None and options is not None:
        dumps = options.hlo
    return load_trace(trace, hlo=dumps, run=run, options=options, **fields)


@dataclass(eq=False, slots=True)
class Report:
    """A built report: ``ops`` (a DataFrame), ``summary``, ``findings``, and every format of
    the CLI (``to_csv``, ``to_json``, ``to_markdown``, ``to_html``).  ``data`` is the whole
    report as every renderer reads it (``profan.report.model.Report``)."""

    data: model.Report
    top: int = DEFAULT_TOP  # the ops the text formats list
    path: str = ""  # what it was made from (outputs are never written inside it)
    _ops: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def ops(self) -> pd.DataFrame:
        """One row per op (heaviest first), the JSON report's op fields as columns."""
        if self._ops is None:
            from profan.report.render.ops_table import ops_frame

            self._ops = ops_frame(self.data)
        return self._ops

    @property
    def summary(self) -> model.Summary:
        return self.data.summary

    @property
    def findings(self) -> list[model.Finding]:
        return self.data.findings

    @property
    def steps(self) -> pd.DataFrame:
        import pandas as pd

        from profan.report.model.codec import record

        return pd.DataFrame([record(step) for step in self.data.steps])

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as Python data (SCHEMA.md)."""
        return self.data.to_dict()

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str | None:
        """The JSON report (``profan report --format json``); written to ``path`` if given."""
        return self._output(json_text(self.data), path)

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str | None:
        """The op table as CSV (``profan report --format csv``); written to ``path`` if given."""
        from profan.report.render.ops_table import ops_csv

        return self._output(ops_csv(self.data), path)

    def to_markdown(
        self, path: str | os.PathLike[str] | None = None, *, top: int | None = None
    ) -> str | None:
        """The Markdown report (no plots); written to ``path`` if given."""
        from profan.report.render import markdown

        text = markdown.render(self.data, top=top or self.top, images={})
        return self._output(text, path)

    def to_html(
        self, path: str | os.PathLike[str] | None = None, *, top: int | None = None
    ) -> str | None:
        """The HTML page of ``profan report --format html``; written to ``path`` if given."""
        from profan.report.render import html as page

        return self._output(page.render(self.data, top=top or self.top), path)

    def to_text(self, *, top: int | None = None, width: int = 120) -> str:
        """The terminal report, plain, ``width`` columns wide."""
        from profan.report.render import terminal

        return terminal.render(self.data, top=top or self.top, colour=False, width=width)

    def _output(self, text: str, path: str | os.PathLike[str] | None) -> str | None:
        if path is None:
            return text
        from profan.outputs import refuse_inputs, write_file

        refuse_inputs([("path", path)], [("trace", self.path or None)])
        write_file(Path(path), text, str(path))
        return None

    def __repr__(self) -> str:
        return f"<profan.Report {describe(self.data)}>"

    def _repr_html_(self) -> str:
        """The notebook's view: the header and the top ops (the whole page is ``to_html``)."""
        return html_view(self.data, min(self.top, HTML_VIEW_TOP))


def json_text(data: model.Report) -> str:
    """The JSON report's text, as ``profan report --format json`` prints it."""
    import msgspec  # (json.dumps with an indent is pure Python: 10x slower)

    encoded = msgspec.json.encode(data.to_dict())
    return msgspec.json.format(encoded, indent=1).decode("utf-8") + "\n"


def describe(data: model.Report) -> str:
    """One line: trace, chip, devices, steps, ops (the short repr)."""
    from profan.report.format import percent, seconds

    device = data.device
    kind = device.type or device.kind or "?"
    summary = data.summary
    step = summary.step_time_median_s
    steps = f"{summary.step_count} steps" + (f" (median {seconds(step)})" if step else "")
    mfu = f", MFU {percent(summary.mfu)}" if summary.mfu is not None else ""
    trace = data.trace.path or "?"
    ops = f"{len(data.ops)} ops"
    if summary.op_count and summary.op_count != len(data.ops):
        ops += f" (of {summary.op_count}: filtered)"
    return f"{trace}: chip {data.chip.name or '?'}, {device.count} × {kind}, {steps}, {ops}{mfu}"


def html_view(data: model.Report, top: int) -> str:
    """A small HTML block for a notebook: the report's header and its ``top`` ops."""
    from profan.report.format import percent, seconds

    summary = data.summary
    header = [
        ("trace", str(data.trace.path)),
        ("chip", str(data.chip.display_name or data.chip.name)),
        ("devices", f"{data.device.count} × {data.device.kind}"),
        ("steps", f"{summary.step_count}, median {seconds(summary.step_time_median_s)}"),
        ("MFU", percent(summary.mfu) if summary.mfu is not None else "-"),
        ("ops", f"{len(data.ops)}, findings {len(data.findings)}"),
    ]
    rows = "".join(
        f"<tr><th style='text-align:left'>{name}</th><td>{html.escape(value)}</td></tr>"
        for name, value in header
    )
    head = "".join(
        f"<th>{name}</th>"
        for name in ("op", "category", "n", "measured", "ideal", "bound", "eff", "flags")
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(cell)}</td>"
            for cell in (
                op.label,
                op.category,
                str(op.occurrences),
                seconds(op.measured_s),
                seconds(op.roofline_s),
                op.bound_by,
                percent(op.efficiency) if op.efficiency is not None else "-",
                ", ".join(op.flags),
            )
        )
        + "</tr>"
        for op in data.ops[:top]
    )
    more = len(data.ops) - min(top, len(data.ops))
    tail = f"<p>{more} more ops: <code>.ops</code> has them all.</p>" if more > 0 else ""
    return (
        "<div class='profan-report'><b>profan report</b>"
        f"<table>{rows}</table><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>{tail}</div>"
    )
