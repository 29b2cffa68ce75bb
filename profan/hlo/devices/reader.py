"""A small cursor over device-list attribute text, and iota tile assignments.

The forms are tiny; a hand-written reader gives precise column numbers and costs nothing on
50,000-line modules.
"""

from __future__ import annotations

import math

from profan.errors import HloSyntaxError

# Devices a group list may expand to (as profan.hlo.verify bounds replica groups): a larger
# count is refused before its ids are listed.
MAX_DEVICES = 1 << 20


class Reader:
    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.what = what

    def error(self, reason: str, *expected: str) -> HloSyntaxError:
        return HloSyntaxError(
            f"bad {self.what}: {reason}",
            line=1,
            column=self.pos + 1,
            text=self.text,
            expected=tuple(expected),
        )

    def skip_ws(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos] in " \t\r\n":
                self.pos += 1
            elif text.startswith("/*", self.pos):  # ``/*index=5*/`` comments XLA prints
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            else:
                break

    def peek(self, token: str) -> bool:
        self.skip_ws()
        return self.text.startswith(token, self.pos)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            found = self.text[self.pos : self.pos + 10] or "end of text"
            raise self.error(f"found {found!r}", repr(token))

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)

    def integer(self) -> int:
        self.skip_ws()
        start = self.pos
        if self.pos < len(self.text) and self.text[self.pos] == "-":
            self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if self.pos == start or self.text[start : self.pos] == "-":
            self.pos = start
            found = self.text[self.pos : self.pos + 10] or "end of text"
            raise self.error(f"found {found!r}", "an integer")
        return int(self.text[start : self.pos])

    def int_list(self, open_: str, close: str) -> list[int]:
        """``open_ int (, int)* close`` — possibly empty."""
        self.expect(open_)
        values: list[int] = []
        if self.accept(close):
            return values
        while True:
            values.append(self.integer())
            if self.accept(close):
                return values
            self.expect(",")

    def name(self) -> str:
        """A quoted ``'axis'`` / ``"axis"`` or a bare identifier."""
        self.skip_ws()
        text = self.text
        if self.pos < len(text) and text[self.pos] in "'\"":
            quote = text[self.pos]
            end = text.find(quote, self.pos + 1)
            if end < 0:
                raise self.error("unterminated quoted name", quote)
            value = text[self.pos + 1 : end]
            self.pos = end + 1
            return value
        start = self.pos
        while self.pos < len(text) and (text[self.pos].isalnum() or text[self.pos] in "_.-$"):
            self.pos += 1
        if self.pos == start:
            raise self.error(f"found {text[self.pos : self.pos + 10]!r}", "a name")
        return text[start : self.pos]


def iota_devices(reshape_dims: list[int], perm: list[int] | None = None) -> list[int]:
    """``0..N-1`` laid out in ``reshape_dims``, transposed by ``perm``, flattened row-major."""
    total = math.prod(reshape_dims) if reshape_dims else 1
    if perm is None or perm == list(range(len(reshape_dims))):
        return list(range(total))
    rank = len(reshape_dims)
    strides = [1] * rank
    for axis in range(rank - 2, -1, -1):
        strides[axis] = strides[axis + 1] * reshape_dims[axis + 1]
    out_dims = [reshape_dims[p] for p in perm]
    out_strides = [strides[p] for p in perm]
    result: list[int] = [0]
    # Build the flat list one output axis at a time (major to minor).
    for size, stride in zip(out_dims, out_strides, strict=True):
        result = [base + i * stride for base in result for i in range(size)]
    return result


def check_perm(reader: Reader, perm: list[int], rank: int) -> None:
    if sorted(perm) != list(range(rank)):
        raise reader.error(f"T{tuple(perm)} is not a permutation of {rank} dimensions")


def read_iota_tail(reader: Reader, count: int) -> list[int]:
    """After ``<=``: ``[d0,…]`` and optional ``T(p…)``; returns ``count`` device ids."""
    reshape = reader.int_list("[", "]")
    if any(d <= 0 for d in reshape):
        raise reader.error(f"iota reshape dims {reshape} must be positive")
    perm = None
    if reader.accept("T"):
        perm = reader.int_list("(", ")")
        check_perm(reader, perm, len(reshape))
    if count > MAX_DEVICES:
        raise reader.error(f"iota groups of {count} devices: more than the {MAX_DEVICES} accepted")
    if math.prod(reshape) != count:
        raise reader.error(
            f"iota reshape {reshape} holds {math.prod(reshape)} devices, "
            f"the tile shape needs {count}"
        )
    return iota_devices(reshape, perm)
