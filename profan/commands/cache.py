"""``profan cache info|clear``: what profan keeps in its cache directory, and removing it.

The cache (``profan.cache``) holds loaded profiles, pod hosts' reduced results, built reports
and parsed HLO, so that re-opening an unchanged profile reads no trace.  ``--no-cache`` on the
commands that read traces neither reads nor writes it.  ``clear`` removes only the entries
profan wrote, and only from a directory profan made (``profan.cache.trust``): a mistaken
``PROFAN_CACHE_DIR`` is refused, with nothing removed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("info", "clear"), help="info: sizes; clear: remove")


def run(args: argparse.Namespace, options: RunOptions) -> int:
    from profan.cache import store, trust
    from profan.errors import ConfigError
    from profan.paths import cache_root

    try:
        bound = store.max_bytes()
    except ValueError as error:
        raise ConfigError(f"{store.MAX_BYTES_ENV}: {error}") from None
    root = cache_root()
    if args.action == "clear":
        if not root.exists():
            sys.stdout.write(f"removed 0 files (0 B): {root} does not exist\n")
            return 0
        try:
            count, size = store.clear()
        except trust.Refused as refused:
            raise ConfigError(f"cache clear: {refused.reason}; nothing removed") from None
        sys.stdout.write(f"removed {count} files ({_size(size)}) from {root}\n")
        return 0
    lines = [f"cache    {root}"]
    try:
        trust.root(root, create=False)
    except trust.Refused as refused:
        lines.append(f"not used: {refused.reason}")
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    files = store.stored_files()
    total = sum(item.size for item in files)
    lines.append(
        f"size     {_size(total)} in {len(files)} files, bound {_size(bound)} "
        f"(${store.MAX_BYTES_ENV}; least recently used entries go first)"
    )
    for kind in sorted(store.KINDS):
        mine = [item for item in files if item.kind == kind]
        what = _KINDS.get(kind, "")
        size = sum(item.size for item in mine)
        lines.append(f"  {kind:<9} {_size(size):>9} {len(mine):>6} files  {what}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


_KINDS = {
    "reports": "built reports (and annotated HLO)",
    "profiles": "loaded profiles (op tables, modules)",
    "hosts": "pod hosts' reduced results",
    "hlo": "parsed HLO text",
    "hloproto": "HLO modules converted from traces",
    "inputs": "content hashes of input files, by stat signature",
    "lark": "the HLO parser's tables",
}


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
