"""Where an export goes: its form from the file name, the files it writes, and the rules that
keep the user's trace untouched (never written in place, never inside the trace directory, only
whole files: a temporary file beside the target is moved into place when complete)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from profan.errors import ConfigError
from profan.outputs import atomic_file
from profan.trace.discover import XPLANE_SUFFIX, Run
from profan.trace.storage import is_remote

__all__ = ["atomic_file", "check_targets", "output_form", "xplane_targets"]

Form = Literal["xplane", "json"]
JSON_SUFFIXES = (".json", ".json.gz")
DEFAULT_RUN = "profan"  # the run directory's name when the trace's run has none


def output_form(output: str, forced: str | None) -> Form:
    """``--format`` when given, else what the file name says."""
    if forced is not None:
        if forced not in ("xplane", "json"):
            raise ConfigError(f"--format must be xplane or json, not {forced!r}")
        return forced  # type: ignore[return-value]
    if output.endswith(XPLANE_SUFFIX):
        return "xplane"
    if output.endswith(JSON_SUFFIXES):
        return "json"
    raise ConfigError(
        f"--output {output}: cannot tell the form from the name: end it with {XPLANE_SUFFIX} "
        "(an annotated copy for XProf/TensorBoard), .json or .json.gz (Chrome trace for "
        "Perfetto UI), or give --format xplane|json (xplane into a directory: a log dir)"
    )


def xplane_targets(output: str, run: Run) -> dict[str, Path]:
    """The annotated copy of each host: ``output`` itself for one host named ``*.xplane.pb``;
    otherwise ``output`` is a log directory XProf/TensorBoard open as it is, and each host goes
    to ``plugins/profile/<run>/<host>.xplane.pb`` under it."""
    hosts = sorted(run.files)
    if output.endswith(XPLANE_SUFFIX):
        if len(hosts) > 1:
            raise ConfigError(
                f"--output {output}: the run has {len(hosts)} hosts ({', '.join(hosts[:4])}"
                f"{', …' if len(hosts) > 4 else ''}); give a directory and each host is written "
                f"to DIR/plugins/profile/RUN/HOST{XPLANE_SUFFIX}"
            )
        return {hosts[0]: Path(output)}
    folder = Path(output) / "plugins" / "profile" / (run.name or DEFAULT_RUN)
    return {host: folder / f"{host}{XPLANE_SUFFIX}" for host in hosts}


def check_targets(targets: list[Path], traces: list[str], run: Run) -> None:
    """Refuse a target inside a trace directory (the one given, the one read, the run's), or
    one that is an input."""
    local = [Path(trace).resolve() for trace in traces if not is_remote(trace)]
    if not local:
        return  # the inputs are in object storage; the targets are local files
    folders = {path if path.is_dir() else path.parent for path in local}
    if not is_remote(str(run.path)):
        folders.add(Path(str(run.path)).resolve())
    inputs = [Path(str(file)) for file in run.files.values()]
    for target in targets:
        resolved = target.resolve()
        for folder in folders:
            if resolved == folder or folder in resolved.parents:
                raise ConfigError(
                    f"--output {target} is inside the trace directory {folder}: profan never "
                    "writes there (it may be read-only or shared); choose another place"
                )
        for file in inputs:
            if resolved == file.resolve() or (target.exists() and os.path.samefile(target, file)):
                raise ConfigError(f"--output {target} is the trace itself; choose another file")
