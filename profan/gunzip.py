"""Gzip decompression of user input with a cap on what it may grow to.

A few hundred KB of gzip can inflate to gigabytes (of zeros, say); decompressed whole, such a
file takes minutes and the machine's memory before anything can say it is not a trace.  So
every gunzip of a user's file streams, counting, and stops at the first of two limits:

* an absolute size, ``DEFAULT_MAX_BYTES`` (4 GiB);
* a ratio to the compressed size, ``DEFAULT_RATIO`` (50x; profiles compress 3-20x), never below
  ``RATIO_FLOOR`` (small files may compress better and still be small).

``$PROFAN_GUNZIP_LIMIT`` raises (or lowers) them: a size (``8GiB``, ``500MB``, bytes), a ratio
(``200x``), both (``8GiB,200x``), or ``none`` for no limit.
"""

from __future__ import annotations

import io
import os
import re
import zlib
from dataclasses import dataclass

LIMIT_ENV = "PROFAN_GUNZIP_LIMIT"
DEFAULT_MAX_BYTES = 4 * 2**30
DEFAULT_RATIO = 50.0
RATIO_FLOOR = 32 * 2**20
_CHUNK = 2**20  # output produced per step, so that a bomb is caught within a MiB

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]*)$")
_RATIO = re.compile(r"^(\d+(?:\.\d+)?)\s*x$")


class GunzipLimitError(ValueError):
    """The decompressed data would pass the limit: ``str()`` says which and how to raise it."""


@dataclass(frozen=True, slots=True)
class Limit:
    """The caps on decompressed size (None: that cap is off)."""

    max_bytes: int | None = DEFAULT_MAX_BYTES
    ratio: float | None = DEFAULT_RATIO

    def for_size(self, compressed: int) -> int | None:
        """The most bytes a file of ``compressed`` bytes may inflate to (None: no cap)."""
        caps = []
        if self.max_bytes is not None:
            caps.append(self.max_bytes)
        if self.ratio is not None:
            caps.append(max(RATIO_FLOOR, int(compressed * self.ratio)))
        return min(caps) if caps else None


def parse_limit(text: str) -> Limit:
    """A ``$PROFAN_GUNZIP_LIMIT`` value (ValueError when it is none of the forms above)."""
    value = text.strip().lower()
    if value in ("none", "off", "0"):
        return Limit(None, None)
    max_bytes: int | None = None
    ratio: float | None = None
    for part in (piece.strip() for piece in value.split(",")):
        if match := _RATIO.match(part):
            ratio = float(match.group(1))
        elif (match := _SIZE.match(part)) and match.group(2) in _UNITS:
            max_bytes = int(float(match.group(1)) * _UNITS[match.group(2)])
        else:
            raise ValueError(
                f"{LIMIT_ENV}={text!r}: expected a size (8GiB), a ratio (200x), both "
                "(8GiB,200x) or none"
            )
    if ratio is None and max_bytes is None:
        return Limit()
    # a value naming one cap keeps the other at its default
    return Limit(
        DEFAULT_MAX_BYTES if max_bytes is None else max_bytes,
        DEFAULT_RATIO if ratio is None else ratio,
    )


def current_limit() -> Limit:
    """The limit in force: ``$PROFAN_GUNZIP_LIMIT``, else the defaults."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    return parse_limit(text) if text else Limit()


def gunzip(data: bytes | memoryview, limit: Limit | None = None) -> bytes:
    """The decompressed bytes of gzip ``data`` (every member).  ``GunzipLimitError`` past the
    limit; ``zlib.error`` for damaged data and ``EOFError`` for truncated data, like ``gzip``."""
    cap = (limit or current_limit()).for_size(len(data))
    out = io.BytesIO()
    rest = bytes(data)
    while True:
        inflater = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer, CRC checked
        pending = rest
        while not inflater.eof:
            piece = inflater.decompress(pending, _CHUNK)
            out.write(piece)
            if cap is not None and out.tell() > cap:
                raise GunzipLimitError(_too_large(cap, len(data)))
            pending = inflater.unconsumed_tail
            if not pending and not piece and not inflater.eof:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
        rest = inflater.unused_data
        if rest[:2] != b"\x1f\x8b":
            if rest.strip(b"\0"):  # zeros after the last member are padding, not data
                raise zlib.error("data after the last gzip member is not gzip")
            return out.getvalue()


def _too_large(cap: int, compressed: int) -> str:
    return (
        f"decompresses to more than {cap / 2**20:,.0f} MiB ({compressed:,} bytes compressed; "
        f"a gzip bomb?); set {LIMIT_ENV} (e.g. 16GiB,500x, or none) to allow more"
    )
