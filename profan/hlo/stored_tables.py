"""The HLO parser's LALR tables, kept between runs as data.

Building the tables of ``grammars/hlo.lark`` takes about half a second per start rule.  Lark's
own ``cache=`` option would keep them, but as a pickle: any process that can write the cache
directory could then run code in the next ``profan``.  Here the tables (what Lark's
``memo_serialize`` gives: dicts, lists, tuples, strings, numbers) are stored as msgpack, each
tuple as an extension type holding its items so that it reads back as a tuple; reading builds
those values and nothing else.  Lark builds its parser from them (``Lark._load_from_dict``, what
its standalone parsers use).
The key is the grammar files, Lark's version, Python's version and the options that shape the
tables.  A damaged or foreign entry is a miss: the tables are built again.
"""

from __future__ import annotations

import gc
import sys
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from profan.cache.keys import digest, sources_digest
from profan.cache.store import read_entry, write_entry

# Options Lark takes when it loads tables rather than builds them (lark.lark._LOAD_ALLOWED_OPTIONS):
# objects such as the transformer, never part of the stored data.
_GIVEN_AT_LOAD = frozenset(
    {
        "tree_class",
        "transformer",
        "g_regex_flags",
        "lexer_callbacks",
        "use_bytes",
        "postlex",
        "regex",
        "debug",
        "propagate_positions",
        "_plugins",
    }
)
# Options that only say where the grammar came from: not needed to parse.
_NOT_STORED = frozenset({"import_paths", "source_path", "cache"})
_TUPLE = 1  # msgpack extension code of a tuple (its items, packed)
_BIG_INT = 2  # an integer msgpack has no room for (a regex's unbounded width), as its digits
_ENCODER = msgspec.msgpack.Encoder()


def _from_extension(code: int, data: memoryview) -> Any:
    if code == _TUPLE:
        return tuple(_DECODER.decode(data))
    if code == _BIG_INT:
        return int(bytes(data).decode("ascii"))
    raise ValueError(f"unknown msgpack extension {code}")


_DECODER = msgspec.msgpack.Decoder(ext_hook=_from_extension)


def _tagged(value: Any) -> Any:
    """``value`` with every tuple, and every integer beyond 64 bits, as a msgpack extension
    (plain msgpack reads tuples as lists and has no such integers)."""
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return msgspec.msgpack.Ext(_BIG_INT, str(value).encode("ascii"))
    if isinstance(value, tuple):
        return msgspec.msgpack.Ext(_TUPLE, _ENCODER.encode([_tagged(item) for item in value]))
    if isinstance(value, list):
        return [_tagged(item) for item in value]
    if isinstance(value, dict):
        return {key: _tagged(item) for key, item in value.items()}
    return value


@cache
def _grammar_files_digest(folder: str) -> str:
    """Every grammar file of ``folder`` (names and contents), taken once per process: the
    parser opens three start rules of the same files."""
    files = sorted(Path(folder).glob("*.lark"))
    return sources_digest("grammars", [(path.name, path) for path in files])


def open_grammar_cached(name: str, **options: Any) -> Any:
    """``profan.paths.open_grammar(name, **options)`` (a Lark LALR parser), its tables reused
    from the cache when the grammar, Lark and these options are unchanged."""
    import lark
    from lark import Lark

    from profan.paths import grammar_path, open_grammar

    at_load = {k: v for k, v in options.items() if k in _GIVEN_AT_LOAD}
    shaping = sorted((k, repr(v)) for k, v in options.items() if k not in _GIVEN_AT_LOAD)
    key = digest(
        [
            "lark",
            name,
            _grammar_files_digest(str(grammar_path(name).parent)),
            lark.__version__,
            list(sys.version_info[:2]),
            shaping,
            bool(options.get("_plugins")),
        ]
    )
    tables = _read_tables(key)
    if tables is not None:
        try:
            # (lark leaves it unannotated: profan.hlo is checked strictly)
            return Lark._load_from_dict(tables["data"], tables["memo"], **at_load)  # type: ignore[no-untyped-call]
        except Exception:  # tables Lark cannot load are a miss: built again below
            pass
    parser = open_grammar(name, **options)
    _write_tables(key, parser)
    if not gc.isenabled():
        # (``profan.cli.run``) building the tables leaves ~10 MB of cycles behind, which would
        # otherwise stay for the whole of the first command
        gc.collect()
    return parser


def _read_tables(key: str) -> dict[str, Any] | None:
    found = read_entry("lark", key)
    if found is None:
        return None
    try:
        tables = _DECODER.decode(found[0])
    except (msgspec.DecodeError, ValueError, TypeError, RecursionError):
        return None
    if not isinstance(tables, dict) or not {"data", "memo"} <= tables.keys():
        return None
    return tables


def _write_tables(key: str, parser: Any) -> None:
    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data["options"] = {
        k: v for k, v in data["options"].items() if k not in _GIVEN_AT_LOAD and k not in _NOT_STORED
    }
    tables = {"data": data, "memo": memo}
    try:
        packed = _ENCODER.encode(_tagged(tables))
        faithful = _DECODER.decode(packed) == tables
    except (TypeError, ValueError, OverflowError, msgspec.DecodeError):
        faithful = False
    if faithful:  # plain values only: what is read back is what Lark wrote
        write_entry("lark", key, msgspec.Raw(packed))
