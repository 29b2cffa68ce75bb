"""Where profan finds its own data files and keeps its caches."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lark import Lark

PACKAGE_DIR = Path(__file__).resolve().parent


def grammar_path(name: str) -> Path:
    """A grammar file: packaged under ``profan/grammars`` when installed, else ``grammars/``."""
    for candidate in (PACKAGE_DIR / "grammars" / name, PACKAGE_DIR.parent / "grammars" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"grammar {name} not found beside the profan package")


def open_grammar(name: str, **options: Any) -> Lark:
    """A Lark parser of grammar file ``name``: read with ``Lark.open_from_package`` from the
    installed package (``profan/grammars``, where the wheel puts them), else from ``grammars/``
    beside the package in a checkout."""
    from lark import Lark  # only parsers need it (``import profan`` and most commands do not)

    if (PACKAGE_DIR / "grammars" / name).is_file():
        return Lark.open_from_package("profan", name, ("grammars",), **options)
    return Lark.open(str(grammar_path(name)), **options)


def data_path(name: str) -> Path:
    """A data file shipped inside the package (``profan/data``)."""
    return PACKAGE_DIR / "data" / name


def cache_root() -> Path:
    """The user's cache directory for profan: ``$PROFAN_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/profan``, else ``~/.cache/profan`` (not created here)."""
    root = os.environ.get("PROFAN_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "profan"


def cache_dir(kind: str) -> Path:
    """A cache folder under the user's cache directory (``cache_root``), created when missing.

    Never inside a trace directory: traces may be read-only or shared.
    """
    path = cache_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
