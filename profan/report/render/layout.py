"""Text layout for terminals: ANSI styles, tables whose columns wrap and shrink to fit a width,
paragraphs that keep a number with its unit.  Shared by the report and ``profan hlo``."""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import IO

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


class Style:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def use_colour(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def _visible_len(text: str) -> int:
    out, skipping = 0, False
    for char in text:
        if char == "\x1b":
            skipping = True
        elif skipping and char == "m":
            skipping = False
        elif not skipping:
            out += 1
    return out


@dataclass(slots=True)
class Column:
    header: str
    right: bool = False  # numbers align right
    # "name": split at . _ - /; "words": join pieces with spaces; "path": drop leading dirs
    wrap: str | None = None
    cap: int = 0  # widest a wrapping column grows to when there is room
    min_width: int = 0  # narrowest a wrapping column shrinks to


def _wrap_name(name: str, width: int, **options: str) -> list[str]:
    """``profan.report.format.wrap_name``, imported when a table is laid out: choosing a width
    and colours (``terminal_width``, ``use_colour``) must not load the report's formatting, which
    loads the cost models."""
    from profan.report.format import wrap_name as wrap

    return wrap(name, width, **options)


def wrap_pieces(pieces: list[str], width: int, mode: str) -> list[str]:
    """Lines of at most ``width`` columns: names split at their separators; word pieces (a
    shape, ``× shape``) joined greedily with spaces and split themselves only when too long."""
    if mode == "name":
        return [line for piece in pieces for line in _wrap_name(piece, width)]
    if mode == "path":
        return [line for piece in pieces for line in shorten_path(piece, width)]
    lines: list[str] = []
    current = ""
    for piece in pieces:
        for word in _words_fitting(piece, width):
            if current and len(current) + 1 + len(word) <= width:
                current += " " + word
            else:
                if current:
                    lines.append(current)
                current = word
    if current:
        lines.append(current)
    return lines or [""]


def shorten_path(path: str, width: int) -> list[str]:
    """``…/dir/file.py:12``: the leading directories dropped until the rest fits (the file and
    line matter most); a file name longer than a line is split at its separators."""
    if len(path) <= width:
        return [path]
    parts = path.split("/")
    for k in range(1, len(parts)):
        candidate = "…/" + "/".join(parts[k:])
        if len(candidate) <= width:
            return [candidate]
    return _wrap_name("…/" + parts[-1], width)


def _words_fitting(piece: str, width: int) -> list[str]:
    """A piece too long for a line, split at its separators (spaces, commas in a shape)."""
    if len(piece) <= width:
        return [piece]
    return [line.strip() for line in _wrap_name(piece, width, separators=" ,._-/")]


def _natural_width(column: Column, cell: list[str]) -> int:
    if column.wrap is None:
        return max((_visible_len(line) for line in cell), default=0)
    if column.wrap == "words":
        longest = len(" ".join(cell))
    else:
        longest = max((len(piece) for piece in cell), default=0)
    return min(longest, column.cap) if column.cap else longest


def fit_widths(
    columns: list[Column], rows: list[list[list[str]]], width: int, sep: int
) -> list[int] | None:
    """Column widths whose sum fits ``width``, shrinking the wrapping columns (the widest first)
    down to their minimum; None when even that does not fit."""
    widths = [
        max([len(c.header)] + [_natural_width(c, row[i]) for row in rows])
        for i, c in enumerate(columns)
    ]
    excess = sum(widths) + sep * (len(columns) - 1) - width
    floors = [
        max(c.min_width, len(c.header)) if c.wrap else widths[i] for i, c in enumerate(columns)
    ]
    # one column at a time from whichever wrapping column is widest: they wrap evenly
    while excess > 0:
        room = [(widths[i] - floors[i], -i) for i in range(len(columns)) if widths[i] > floors[i]]
        if not room:
            break
        i = -max(room)[1]
        widths[i] -= 1
        excess -= 1
    return widths if excess <= 0 else None


def table(
    columns: list[Column], rows: list[list[list[str]]], widths: list[int], style: Style
) -> list[str]:
    """Rows of cells (each a list of pieces), wrapped to ``widths``."""
    sep = " │ " if style.colour else "  "
    cells = [
        [
            wrap_pieces(cell, widths[i], wrap) if (wrap := columns[i].wrap) else cell or [""]
            for i, cell in enumerate(row)
        ]
        for row in rows
    ]

    def pad(text: str, i: int) -> str:
        gap = " " * max(widths[i] - _visible_len(text), 0)
        return gap + text if columns[i].right else text + gap

    lines = [style(sep.join(pad(c.header, i) for i, c in enumerate(columns)).rstrip(), "bold")]
    lines.append(("─" if style.colour else "-") * (sum(widths) + len(sep) * (len(widths) - 1)))
    for row in cells:
        height = max(len(c) for c in row)
        for k in range(height):
            parts = [pad(cell[k] if k < len(cell) else "", i) for i, cell in enumerate(row)]
            lines.append(sep.join(parts).rstrip())
    return lines


def para(text: str, width: int, indent: int = 0, hang: int = 4) -> list[str]:
    """Plain text wrapped to ``width``: first line indented by ``indent``, the rest by
    ``indent + hang``; words longer than a line are split."""
    first = " " * indent
    rest = " " * (indent + hang)
    # keep a number with its unit ("472 µs") on one line
    glued = _NUMBER_UNIT.sub(lambda m: m.group(1) + _GLUE + m.group(2), text)
    lines = textwrap.wrap(
        glued,
        width=max(width, len(rest) + 8),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
    ) or [first.rstrip()]
    return [line.replace(_GLUE, " ") for line in lines]


_GLUE = "\x00"
_NUMBER_UNIT = re.compile(r"(\d) (s|ms|µs|ns|B|kB|MB|GB|TB)\b")


DEFAULT_WIDTH = 160  # piped output with no COLUMNS: wide enough for the full table


def terminal_width(stream: IO[str] | None = None) -> int:
    """``COLUMNS`` when set, else the terminal's width, else (piped) ``DEFAULT_WIDTH``."""
    stream = stream or sys.stdout
    if os.environ.get("COLUMNS", "").strip().isdigit():
        return max(int(os.environ["COLUMNS"]), 40)
    try:
        if stream.isatty():
            return max(os.get_terminal_size(stream.fileno()).columns, 40)
    except (AttributeError, OSError, ValueError):
        pass
    return max(shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, 40)


def try_widths(
    columns: list[Column], rows: list[dict[str, list[str]]], width: int, sep: int, roomy: int = 24
) -> list[int] | None:
    """Widths that fit, letting the first column keep ``roomy`` characters while the others can
    still shrink, else as narrow as every column allows; None when nothing fits."""
    cells = [[row[c.header] for c in columns] for row in rows]
    first = columns[0]
    spacious = Column(first.header, first.right, first.wrap, first.cap, max(first.min_width, roomy))
    return fit_widths([spacious, *columns[1:]], cells, width, sep) or fit_widths(
        columns, cells, width, sep
    )


def fit_columns(
    columns: list[Column],
    rows: list[dict[str, list[str]]],
    width: int,
    sep: int,
    drop_order: tuple[tuple[str, ...], ...] = (),
) -> tuple[list[Column], list[int]]:
    """The columns to show and their widths: the wrapping columns shrink first, then whole
    columns go in ``drop_order``, then the first column shrinks to 8 characters."""
    widths = try_widths(columns, rows, width, sep)
    for dropped in drop_order:
        if widths is not None:
            break
        columns = [c for c in columns if c.header not in dropped]
        widths = try_widths(columns, rows, width, sep)
    if widths is None:  # very narrow: let the first column shrink further
        first = columns[0]
        columns = [Column(first.header, first.right, first.wrap, 0, 8), *columns[1:]]
        widths = try_widths(columns, rows, width, sep, roomy=8)
    return columns, widths or [len(c.header) for c in columns]


def hidden_note(hidden: list[str], width: int, style: Style, advice: str) -> list[str]:
    """``(not shown at W columns: a, b; advice)`` wrapped to the width, dimmed."""
    if not hidden:
        return []
    note = f"(not shown at {width} columns: {', '.join(hidden)}; {advice})"
    return [style(line, "dim") for line in para(note, width, hang=1)]
