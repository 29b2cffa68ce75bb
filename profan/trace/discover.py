"""Finding the trace files of one profiling run under whatever path the user gave.

Accepted, as a local path or any URL fsspec reads (``profan.trace.storage``): the log dir given
to ``jax.profiler.trace`` (holding ``plugins/profile/<run>/``), the ``plugins/profile`` dir, one
run dir, or one file.  A run holds one file per host.  Formats, in
order of preference per host: ``<host>.xplane.pb`` (full stats), then the trace-viewer JSON
(``<host>.trace.json.gz`` / ``.trace.json``, or ``perfetto_trace.json.gz``), which drops stats
and is capped in event count.  A JSON file given alone whose run's ``.xplane.pb`` lies beside
it (``Run.hlo_beside``) is read for its events, and the HLO and device stats it lacks are taken
from that ``.xplane.pb`` (``profan.trace.jsonhlo``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from profan.errors import TraceError
from profan.trace.storage import RemotePath, as_path

XPLANE_SUFFIX = ".xplane.pb"
JSON_SUFFIXES = (".trace.json.gz", ".trace.json")
PERFETTO_NAMES = ("perfetto_trace.json.gz", "perfetto_trace.json")


@dataclass(slots=True)
class Run:
    """One profiling run: its name and one file per host."""

    path: Path | RemotePath
    name: str | None
    files: dict[str, Path | RemotePath] = field(default_factory=dict)  # host -> file
    formats: dict[str, str] = field(default_factory=dict)  # host -> "xplane" | "json"
    skipped: list[str] = field(default_factory=list)  # files not used, and why
    # host -> the .xplane.pb beside its JSON file, whose HLO and device stats the JSON lacks
    hlo_beside: dict[str, Path | RemotePath] = field(default_factory=dict)


def host_and_format(path: Path | RemotePath) -> tuple[str, str] | None:
    """(host, format) for a trace file name, or None when it is not one."""
    name = path.name
    if name.endswith(XPLANE_SUFFIX):
        return name[: -len(XPLANE_SUFFIX)], "xplane"
    for suffix in JSON_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], "json"
    if name in PERFETTO_NAMES:
        return "perfetto", "json"
    return None


def _runs_dir(path: Path | RemotePath) -> Path | RemotePath | None:
    for candidate in (path / "plugins" / "profile", path / "profile", path):
        if candidate.is_dir() and any(
            child.is_dir() and _trace_files(child) for child in _children(candidate)
        ):
            return candidate
    return None


def _children(path: Path | RemotePath) -> list[Path | RemotePath]:
    try:
        return sorted(path.iterdir())
    except OSError as error:
        raise TraceError(str(path), f"cannot list directory: {error.strerror}") from None


def _trace_files(path: Path | RemotePath) -> list[Path | RemotePath]:
    return [p for p in _children(path) if p.is_file() and host_and_format(p) is not None]


def find_run(path: str | os.PathLike[str], run: str | None = None) -> Run:
    """The run to load: ``run`` by name, else the newest (by name, then modification time)."""
    root = as_path(path)
    if not root.exists():
        raise TraceError(str(root), "no such file or directory")
    if root.is_file():
        found = host_and_format(root)
        if found is None:
            raise TraceError(
                str(root),
                "not a trace file (expected *.xplane.pb, *.trace.json.gz, *.trace.json "
                "or perfetto_trace.json.gz)",
            )
        host, fmt = found
        given = Run(root.parent, None, {host: root}, {host: fmt})
        beside = _xplane_beside(root, host) if fmt == "json" else None
        if beside is not None:
            given.hlo_beside[host] = beside
            # (in the cache keys too: a report made without it is not the one made with it)
            given.skipped.append(
                f"the events of {beside.name} (the JSON {root.name} was given; only the HLO "
                "and device stats it lacks are read from there)"
            )
        return given
    if _trace_files(root):
        return _collect(root, root.name if root.parent.name == "profile" else None)
    runs_dir = _runs_dir(root)
    if runs_dir is None:
        raise TraceError(
            str(root),
            "no trace files found (looked for plugins/profile/<run>/<host>.xplane.pb, "
            "<host>.trace.json.gz, perfetto_trace.json.gz)",
        )
    runs = [child for child in _children(runs_dir) if child.is_dir() and _trace_files(child)]
    if run is not None:
        chosen = [r for r in runs if r.name == run]
        if not chosen:
            names = ", ".join(r.name for r in runs)
            raise TraceError(str(root), f"no run named {run!r} (runs: {names})")
        return _collect(chosen[0], run)
    # Run names are timestamps (YYYY_MM_DD_HH_MM_SS): newest sorts last; mtime breaks ties.
    newest = max(runs, key=lambda r: (r.name, r.stat().st_mtime))
    return _collect(newest, newest.name)


def _xplane_beside(json_file: Path | RemotePath, host: str) -> Path | RemotePath | None:
    """The ``.xplane.pb`` of the same run beside a trace-viewer JSON file: the same host's, or
    for ``perfetto_trace.json.gz`` the only one there."""
    folder = json_file.parent
    same_host = folder / f"{host}{XPLANE_SUFFIX}"
    if same_host.is_file():
        return same_host
    if host == "perfetto":
        found = [p for p in _children(folder) if p.is_file() and p.name.endswith(XPLANE_SUFFIX)]
        if len(found) == 1:
            return found[0]
    return None


def _collect(run_dir: Path | RemotePath, name: str | None) -> Run:
    found = Run(run_dir, name)
    for file in _trace_files(run_dir):
        host, fmt = host_and_format(file)  # type: ignore[misc]
        if host in found.files:
            if found.formats[host] == "xplane":
                found.skipped.append(f"{file.name} (the xplane of host {host} is used)")
                continue
            if fmt != "xplane":
                found.skipped.append(f"{file.name} (another JSON of host {host} is used)")
                continue
            found.skipped.append(f"{found.files[host].name} (the xplane of host {host} is used)")
        found.files[host] = file
        found.formats[host] = fmt
    # perfetto_trace.json.gz repeats a host's trace-viewer JSON when both exist.
    if "perfetto" in found.files and len(found.files) > 1:
        found.skipped.append(f"{found.files.pop('perfetto').name} (per-host files are used)")
        found.formats.pop("perfetto")
    return found
