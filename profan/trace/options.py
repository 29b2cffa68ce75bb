"""``LoadOptions``: every option of ``profan.load`` in one documented, typed place."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """How ``profan.load`` reads a trace.

    Pass them as keywords (``profan.load(path, hlo="dump/", workers=2)``) or as one object
    (``profan.load(path, options=LoadOptions(workers=2))``); keywords override the object.
    """

    #: An XLA dump directory (``*after_optimizations.txt``) or one HLO text file.  Its modules
    #: replace the HLO embedded in the trace (matched by module name).
    hlo: str | os.PathLike[str] | None = None
    #: The run directory's name under ``plugins/profile`` (default: the newest run).
    run: str | None = None
    #: Processes that read hosts in parallel (default: one per CPU, at most one per host;
    #: 1 reads every host in the calling process).  One big host (>= 32 MiB, local) is read
    #: in that many shares at once (default: one more process per idle CPU, at most 4).
    workers: int | None = None
    #: Reuse and keep what was read (the HLO modules, the loaded profile or each pod host's
    #: reduced result) under the user's cache directory (``profan.paths.cache_dir``, see
    #: ``profan.cache``), keyed by the content of the trace files and of ``hlo``; never written
    #: next to the trace.
    use_cache: bool = True
    #: ``"events"`` (one row per op execution of every host), ``"reduced"`` (each host reduced
    #: where it is read; per-event tables of the median host only) or ``"auto"``: reduced for
    #: two or more hosts whose files exceed ``reduce_above_bytes``.  See ``profan.trace.pod``.
    form: Literal["auto", "events", "reduced"] = "auto"
    reduce_above_bytes: int = 256 * 2**20
    #: A Dask distributed scheduler (``tcp://host:8786``) whose workers read the hosts (extra
    #: ``[dask]``); default: the ``PROFAN_SCHEDULER`` environment variable, else local processes.
    scheduler: str | None = None
    #: Hosts done and bytes read on stderr.  Default: only when stderr is a terminal and the
    #: ``CI`` environment variable is unset.
    progress: bool | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if self.form not in ("auto", "events", "reduced"):
            raise ValueError(f"form must be 'auto', 'events' or 'reduced', not {self.form!r}")

    @classmethod
    def build(cls, options: LoadOptions | None = None, **fields: Any) -> LoadOptions:
        """``options`` (or the defaults) with ``fields`` replaced; unknown names are an error."""
        known = {item.name for item in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise TypeError(
                f"unknown load option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return dataclasses.replace(options or cls(), **fields)
