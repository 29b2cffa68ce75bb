"""One report asked for: its inputs located once, the options it is built with, and its cache
keys, each taken once, when first needed.

Every command that reports on a trace (``report``, ``check``, ``diff``, ``annotate``, ``export``,
``whatif``) makes a ``Request`` where it starts (``profan.report.analysis.pipeline.request_for``)
and hands it to the pipeline.  The key parts of the inputs (each host file's and ``--hlo``'s
content hash: ``profan.trace.fingerprint.Fingerprint``, and the user's chip and kernel tables)
are taken once per command whatever asks for them: whether to read the trace ahead, the report
cache's lookup, the loaded profile's, the stores, a check's output key.  A request for the same
inputs with another chip or rule set (``replace``) shares them.

Nothing here imports pandas or the trace readers: a report found in the cache costs only this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from profan.cache.keys import file_input
from profan.report.stored import report_key
from profan.trace.discover import Run
from profan.trace.fingerprint import Fingerprint
from profan.trace.options import CHIPS_ENV, KERNELS_ENV, LoadOptions, RunOptions

if TYPE_CHECKING:
    from profan.report.rules.config import RuleConfig
    from profan.sharding import ProgramMesh


class Inputs(NamedTuple):
    """What a report is made from: the trace path (``trace/`` of a fixture-style folder), the
    HLO dumps joined to it, and the run found there."""

    trace: str
    hlo: str | None
    run: Run


@dataclass(frozen=True, slots=True)
class JsonReport:
    """A JSON report given where a trace could be (``check``, ``diff``): read back as written,
    never cached."""

    path: str


_NOT_TAKEN: Any = object()  # (a key part not taken yet; None means "cannot be cached")


@dataclass(slots=True)
class _Shared:
    """What the requests for the same inputs and options share: the inputs' key parts
    (``fingerprint``) and those of the user's tables, each taken once."""

    fingerprint: Fingerprint
    tables: Any = _NOT_TAKEN


@dataclass(frozen=True, slots=True)
class Request:
    """A report asked for: ``inputs`` as located, the ``options`` of the command, the chip
    asked for, the rules' thresholds (None: the defaults), whether the HTML page's data is
    wanted (``page``), the meshes a caller knows (``program_meshes``: such a report is not
    cached) and the path as it was given (for messages)."""

    inputs: Inputs
    options: RunOptions = field(default_factory=RunOptions)
    chip: str | None = None
    config: RuleConfig | None = None
    page: bool = False
    program_meshes: Mapping[str, ProgramMesh] | None = None
    path: str = ""
    shared: _Shared | None = None  # (made from ``inputs``; kept by ``replace``)
    _key: list[Any] = field(default_factory=lambda: [_NOT_TAKEN], init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.path:
            object.__setattr__(self, "path", self.inputs.trace)
        if self.shared is None:
            fingerprint = Fingerprint(self.inputs.trace, self.inputs.run, self.inputs.hlo)
            object.__setattr__(self, "shared", _Shared(fingerprint))

    @property
    def fingerprint(self) -> Fingerprint:
        """The inputs' key parts (host files, ``--hlo``), taken once."""
        assert self.shared is not None
        return self.shared.fingerprint

    def replace(self, **changes: Any) -> Request:
        """The same inputs, another chip, rule set or ``page`` (the inputs' key parts are
        shared; the report's key is another), or other options (the user's tables then taken
        again)."""
        if "options" in changes and "shared" not in changes:
            changes["shared"] = _Shared(self.fingerprint)
        return dataclasses.replace(self, **changes)

    @property
    def cached(self) -> bool:
        """Whether the report is looked up in and kept in the cache."""
        return self.options.use_cache and not self.program_meshes

    def report_key(self) -> str | None:
        """The report cache's key (``profan.report.stored.report_key``), taken once; None when
        the report is not cached or an input cannot be fingerprinted."""
        if self._key[0] is _NOT_TAKEN:
            self._key[0] = self._take_key() if self.cached else None
        key: str | None = self._key[0]
        return key

    def _take_key(self) -> str | None:
        from profan.report.rules.config import RuleConfig

        found = self.inputs.run
        files, dump, tables = self.fingerprint.files(), self.fingerprint.dump(), self.tables()
        if files is None or dump is None or tables is None:
            return None
        page_data = ("page",) if self.page else ()  # the HTML page's data makes another report
        return report_key(
            self.inputs.trace,
            found.name,
            found.skipped,
            [files, dump, tables],
            self.chip,
            self.config or RuleConfig(),
            *page_data,
        )

    def tables(self) -> list[Any] | None:
        """The user's chip and kernel tables of ``options`` (``--chips``, ``--kernels``), as key
        parts: each file by content (None: one cannot be read)."""
        shared = self.shared
        assert shared is not None
        if shared.tables is _NOT_TAKEN:
            shared.tables = user_tables(self.options)
        tables: list[Any] | None = shared.tables
        return tables

    def load_options(self, progress: bool | None = None) -> LoadOptions:
        """How the trace is read for this request."""
        return self.options.load_options(self.inputs.hlo, progress)


def user_tables(options: RunOptions) -> list[Any] | None:
    """The user's chip and kernel files in ``options``, by content (None: one cannot be
    fingerprinted, so nothing made with them is cached)."""
    parts: list[Any] = []
    for variable, path in ((CHIPS_ENV, options.chips), (KERNELS_ENV, options.kernels)):
        if not path:
            parts.append([variable, None])
            continue
        found = file_input(Path(path))
        if found is None:
            return None
        parts.append([variable, found])
    return parts
