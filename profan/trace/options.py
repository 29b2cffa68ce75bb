"""The options of reading and costing traces, each in one documented, typed place:
``LoadOptions`` (every option of ``profan.load``) and ``RunOptions`` (what every command that
reads or costs traces takes beside its own: the user's chip and kernel tables, how hosts are
read, the cache).

The environment variables below are the defaults a user may set for them.  They are read once,
where a command or ``profan.load`` / ``profan.report`` starts (``RunOptions.from_environment``,
``LoadOptions.with_environment``); everything deeper is handed the options themselves.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from profan.errors import ConfigError

CHIPS_ENV = "PROFAN_CHIPS"  # a TOML file of extra chips (``--chips``)
KERNELS_ENV = "PROFAN_KERNELS"  # a TOML file of custom-call cost models (``--kernels``)
WORKERS_ENV = "PROFAN_WORKERS"  # hosts read at once by local processes (``--workers``)
SCHEDULER_ENV = "PROFAN_SCHEDULER"  # a Dask scheduler whose workers read hosts (``--scheduler``)


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
    #: Processes that read hosts in parallel (default: ``$PROFAN_WORKERS``, else one per CPU,
    #: at most one per host; 1 reads every host in the calling process).  One big host
    #: (>= 32 MiB, local) is read in that many shares at once (default: one more process per
    #: idle CPU, at most 4).
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

    def with_environment(self, environ: Mapping[str, str] = os.environ) -> LoadOptions:
        """These options, ``workers`` and ``scheduler`` from ``$PROFAN_WORKERS`` and
        ``$PROFAN_SCHEDULER`` where they are not given (``profan.load`` reads them so)."""
        return dataclasses.replace(
            self,
            workers=self.workers if self.workers is not None else workers_from(environ),
            scheduler=self.scheduler or environ.get(SCHEDULER_ENV) or None,
        )


def parse_worker_count(text: str) -> int:
    """A ``--workers`` / ``PROFAN_WORKERS`` value: a whole number of at least 1 (ValueError
    otherwise)."""
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def workers_from(environ: Mapping[str, str]) -> int | None:
    """``$PROFAN_WORKERS`` (None when unset or empty; ``ConfigError`` naming it when bad)."""
    text = environ.get(WORKERS_ENV, "").strip()
    if not text:
        return None
    try:
        return parse_worker_count(text)
    except ValueError as error:
        raise ConfigError(f"{WORKERS_ENV}={text!r}: {error}") from None


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What every command that reads or costs traces takes beside its own options, built once
    where the command starts (``from_environment``: the command line or ``profan.report``'s
    keywords, the environment for what they leave out) and handed down from there."""

    #: A TOML file of extra chips (``--chips``; same schema as ``profan/data/chips.toml``).
    chips: str | None = None
    #: A TOML file of cost models for custom calls (``--kernels``; as ``profan/data/kernels.toml``).
    kernels: str | None = None
    #: Hosts read at once by local processes (``--workers``; default: one per CPU).
    workers: int | None = None
    #: A Dask scheduler whose workers read the hosts (``--scheduler``; default: local processes).
    scheduler: str | None = None
    #: Reuse and fill profan's cache (``--no-cache``: neither).
    use_cache: bool = True

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or self.workers < 1):
            raise ConfigError(f"workers must be at least 1, got {self.workers!r}")

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] = os.environ,
        *,
        costs: bool = True,
        reads_traces: bool = True,
        chips: str | os.PathLike[str] | None = None,
        kernels: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        scheduler: str | None = None,
        use_cache: bool = True,
    ) -> RunOptions:
        """The options given (None: not given), each else its environment variable's value:
        the tables only for a command that ``costs``, workers and scheduler only for one that
        ``reads_traces`` (a variable that means nothing to a command is not read)."""
        if costs:
            chips = chips or environ.get(CHIPS_ENV) or None
            kernels = kernels or environ.get(KERNELS_ENV) or None
        if reads_traces:
            workers = workers if workers is not None else workers_from(environ)
            scheduler = scheduler or environ.get(SCHEDULER_ENV) or None
        return cls(
            chips=None if chips is None else os.fspath(chips),
            kernels=None if kernels is None else os.fspath(kernels),
            workers=workers,
            scheduler=scheduler,
            use_cache=use_cache,
        )

    @contextmanager
    def in_force(self) -> Iterator[None]:
        """Within: the user's chip and kernel tables are part of the catalogue and of the kernel
        registry (each file read and checked now: a bad one fails before any trace is read).
        Without them nothing is imported (``profan chips`` loads no HLO parser)."""
        with ExitStack() as stack:
            if self.chips:
                from profan.chips import using_chip_file

                stack.enter_context(using_chip_file(self.chips))
            if self.kernels:
                from profan.cost.kernels import using_kernel_file

                stack.enter_context(using_kernel_file(self.kernels))
            yield

    def load_options(
        self, hlo: str | os.PathLike[str] | None, progress: bool | None = None
    ) -> LoadOptions:
        """How ``profan.load`` reads a trace for this command."""
        return LoadOptions(
            hlo=hlo,
            workers=self.workers,
            use_cache=self.use_cache,
            scheduler=self.scheduler,
            progress=progress,
        )
