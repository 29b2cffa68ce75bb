"""``load``: a trace path (local or any fsspec URL) -> ``Profile``, in the form that fits.

One host, or several whose files are small, load in the events form (``profan.trace.load``):
every op execution of every host.  Many hosts load in the reduced form (``profan.trace.pod``):
each host reduced where it is read.  ``LoadOptions.form`` chooses explicitly.
"""

from __future__ import annotations

import os
from typing import Any

from profan.hlo.model import Module
from profan.trace.discover import Run, find_run
from profan.trace.executors import Progress
from profan.trace.fingerprint import Fingerprint
from profan.trace.load import sizes_of
from profan.trace.options import LoadOptions
from profan.trace.pod import load_events_cached, load_reduced
from profan.trace.profile import Profile


def load(
    path: str | os.PathLike[str],
    hlo: str | os.PathLike[str] | None = None,
    run: str | None = None,
    *,
    options: LoadOptions | None = None,
    **fields: Any,
) -> Profile:
    """Load a trace (log dir, ``plugins/profile``, run dir or file) into a ``Profile``.

    ``hlo`` and ``run`` and every other keyword are fields of ``LoadOptions`` (see there);
    ``options`` gives them as one object, keywords override it, and ``$PROFAN_WORKERS`` and
    ``$PROFAN_SCHEDULER`` stand in for workers and a scheduler neither gives.
    """
    if hlo is not None:
        fields["hlo"] = hlo
    if run is not None:
        fields["run"] = run
    opts = LoadOptions.build(options, **fields).with_environment()
    return load_run(path, find_run(path, opts.run), opts)


def load_run(
    path: str | os.PathLike[str],
    found: Run,
    opts: LoadOptions,
    dumped: list[Module] | None = None,
    fingerprint: Fingerprint | None = None,
) -> Profile:
    """``load`` of a run already found (``profan.trace.discover.find_run``), with ``opts`` as
    they are (no environment variable read); ``dumped``: the modules of ``opts.hlo``, when the
    caller parsed them already (the events form uses them); ``fingerprint``: the cache key
    parts of ``path``, ``found`` and ``opts.hlo`` the caller took already."""
    sizes = sizes_of(found)
    progress = Progress(len(sizes), sum(sizes), opts.progress)
    reduced = opts.form == "reduced" or (
        opts.form == "auto" and sum(sizes) > opts.reduce_above_bytes
    )
    if reduced and len(found.files) > 1:
        return load_reduced(path, found, opts, sizes, progress, fingerprint)
    return load_events_cached(path, opts, found, progress, dumped, fingerprint)
