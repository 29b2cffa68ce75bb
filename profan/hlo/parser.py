"""HLO text -> ``profan.hlo.model`` objects.

The syntax is in ``grammars/hlo.lark`` (LALR).  The model is built *during* the parse (Lark calls
``ModelBuilder``'s methods as it reduces each rule), so no parse tree is ever materialised.
The builder (``profan.hlo.builder``) makes the model; attribute values stay raw text, decoded
on demand by ``profan.hlo.views``.

Text that does not parse becomes ``profan.errors.HloSyntaxError`` with file, line, column, the
offending line and what was expected: Lark's ``UnexpectedInput`` and the builder's own
deliberate errors.  Any other exception out of the builder is a bug in profan and propagates as
it is (the CLI reports it as an internal error, exit 3), never as the user's syntax error.
"""

from __future__ import annotations

import gc
import os
import re
from functools import lru_cache
from typing import Any, cast

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from profan.errors import HloSyntaxError
from profan.hlo.builder import ModelBuilder
from profan.hlo.model import Instruction, Module
from profan.hlo.tokens import LEAD, MAX_INT_DIGITS, bare, position
from profan.hlo.verify import verify_module

# Friendlier names for terminals in "expected one of" lists.
_TERMINAL_NAMES = {
    "NAME": "a name",
    "OPCODE": "an opcode",
    "SHAPE": "a shape",
    "OPERAND": "an operand",
    "ATTR": "an attribute (, name=value)",
    "LITERAL": "a literal",
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_LBRACE": "'{'",
    "_RBRACE": "'}'",
    "_COMMA": "','",
    "_COLON": "':'",
    "_ARROW": "'->'",
    "_TRAILER": "end of input",
    "INSTR_NAME": "an instruction (name = ...)",
    "INSTR_HEAD": "an instruction (name = ...)",
    "INSTRUCTION": "an instruction (name = ...)",
    "INSTRUCTIONS": "an instruction (name = ...)",
    "ATTRS": "an attribute (, name=value)",
    "SIGNATURE": "a signature ((params) -> shape)",
    "OPERANDS": "operands",
    "ELIDED": "'...'",
    "BUFFER": "b(...)",
    "FILE_NAMES": "FileNames",
    "FUNCTION_NAMES": "FunctionNames",
    "FILE_LOCATIONS": "FileLocations",
    "STACK_FRAMES": "StackFrames",
    "INT": "an integer",
    "STRING": "a string",
    "BRACED": "'{...}'",
    "ROOT": "ROOT",
    "ENTRY": "ENTRY",
    "HLOMODULE": "HloModule",
    "CONSTANT": "constant",
    "$END": "end of input",
}


def _speedups() -> dict[str, Any] | None:
    """lark-cython's plugins when installed (about 5% faster); PROFAN_PURE_PYTHON=1 opts out."""
    if os.environ.get("PROFAN_PURE_PYTHON"):
        return None
    try:
        import lark_cython
    except ImportError:
        return None
    plugins: dict[str, Any] = lark_cython.plugins
    return plugins


def parser_backend() -> str:
    """``"lark-cython"`` or ``"lark"``: which LALR implementation parses."""
    return "lark-cython" if _speedups() else "lark"


@lru_cache(maxsize=1)
def _parsers() -> tuple[Lark, Lark, ModelBuilder]:
    # The LALR tables are kept between runs as data (profan.hlo.stored_tables), never pickled.
    from profan.hlo.stored_tables import open_grammar_cached

    builder = ModelBuilder()
    plugins = _speedups()
    options: dict[str, Any] = dict(
        parser="lalr",
        lexer="contextual",
        transformer=builder,
        maybe_placeholders=False,
        propagate_positions=False,
    )
    if plugins:
        options["_plugins"] = plugins
    module_parser = open_grammar_cached("hlo.lark", start="module", **options)
    builder.operand_item = re.compile(module_parser.get_terminal("OPERAND").pattern.to_regexp())
    builder.attr_item = re.compile(module_parser.get_terminal("ATTR").pattern.to_regexp())
    shape = module_parser.get_terminal("SHAPE").pattern.to_regexp()  # with its lead
    lead = LEAD.pattern
    # one element of a tuple shape, with the ',' or ')' after it (grammar: _HEAD_SHAPE_TEXT)
    builder.tuple_element = re.compile(f"({shape}){lead}([,)])")
    tuple_shape = rf"\((?:{shape}(?:{lead},{shape})*)?{lead}\)"
    builder.instr_head = re.compile(
        rf"{lead}(ROOT\s+)?(%?[A-Za-z_][\w.\-]*+)\s*=\s*({shape}|{tuple_shape})"
        r"\s+(?!constant[ \t]*\()([a-z][a-z0-9_\-]*+)[ \t]*\("
    )
    operand = module_parser.get_terminal("OPERAND").pattern.to_regexp()
    builder.operand_list = re.compile(f"(?:{operand}(?:{lead},{operand})*)?{lead}\\)")
    builder.inline_parser = open_grammar_cached("hlo.lark", start="inline_body", **options)
    line_parser = open_grammar_cached("hlo.lark", start="instruction_line", **options)
    return module_parser, line_parser, builder


def _line_text(text: str, line: int | None) -> str:
    if line is None or line < 1:
        return ""
    lines = text.split("\n", line)
    if line - 1 < len(lines):
        shown = lines[line - 1].rstrip("\r")
        return shown if len(shown) <= 300 else shown[:300] + "…"
    return ""


def _expected_names(names: Any) -> tuple[str, ...]:
    shown = {_TERMINAL_NAMES.get(n, n) for n in names or ()}
    return tuple(sorted(shown))


def _end_of_input(text: str, file: str | None, expected: Any) -> HloSyntaxError:
    """The text stopped where more was expected: placed just past its last character."""
    lines = text.rstrip().split("\n")
    return HloSyntaxError(
        "unexpected end of input",
        file=file,
        line=len(lines),
        column=len(lines[-1]) + 1,
        text=lines[-1][:300],
        expected=_expected_names(expected),
    )


# What text that does not parse raises during a parse: Lark's errors, the builder's deliberate
# ones, and nesting deeper than Python's stack.
_SYNTAX_ERRORS = (UnexpectedInput, HloSyntaxError, RecursionError)


def _translate(error: Exception, text: str, file: str | None) -> HloSyntaxError:
    """A syntax error found during a parse (one of ``_SYNTAX_ERRORS``), as an
    ``HloSyntaxError`` placed in ``file``."""
    if isinstance(error, HloSyntaxError):
        found = error
        return HloSyntaxError(
            found.reason,
            file=file,
            line=found.line,
            column=found.column,
            text=found.text or _line_text(text, found.line),
            expected=found.expected,
        )
    if isinstance(error, UnexpectedEOF):
        return _end_of_input(text, file, error.expected)
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type in ("$END", "_TRAILER"):
            return _end_of_input(text, file, error.expected)
        shown = bare(token)
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        line, column = position(token)
        return HloSyntaxError(
            f"unexpected {shown!r}",
            file=file,
            line=line,
            column=column,
            text=_line_text(text, line),
            expected=_expected_names(error.expected),
        )
    if isinstance(error, UnexpectedCharacters):
        # The lexer stops where the blanks before the bad text begin: skip them.
        # lark declares pos_in_stream by its class default, None; UnexpectedCharacters sets the
        # lexer's position (an int) in __init__, and LEAD matches anywhere (it may match nothing)
        at = LEAD.match(text, error.pos_in_stream).end()  # type: ignore[call-overload]
        line = text.count("\n", 0, at) + 1
        column = at - text.rfind("\n", 0, at)
        reason = (
            f"unexpected character {text[at]!r}" if at < len(text) else "unexpected end of input"
        )
        return HloSyntaxError(
            reason,
            file=file,
            line=line,
            column=column,
            text=_line_text(text, line),
            expected=_expected_names(error.allowed),
        )
    if isinstance(error, UnexpectedInput):
        return HloSyntaxError(
            str(error).splitlines()[0],
            file=file,
            line=getattr(error, "line", None),
            column=getattr(error, "column", None),
            text=_line_text(text, getattr(error, "line", None)),
        )
    return HloSyntaxError("input nested too deeply", file=file)


def _syntax_error(error: Exception, text: str, file: str | None) -> HloSyntaxError:
    """``error`` (raised while parsing ``text``) as the user's syntax error; anything else is
    a bug in profan, re-raised unchanged."""
    # Lark wraps exceptions raised inside callbacks in VisitError on some paths.
    inner = getattr(error, "orig_exc", None)
    found = inner if isinstance(inner, Exception) else error
    if not isinstance(found, _SYNTAX_ERRORS):
        raise found
    return _translate(found, text, file)


# A run of digits longer than Python converts (4,300) anywhere in the text, strings included
# (backend_config's JSON is parsed too): refused once, before the parse, rather than at each of
# the places that convert numbers.
_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1},}}")


def _refuse_long_numbers(text: str, file: str | None) -> None:
    found = _LONG_DIGITS.search(text)
    if found is None:
        return
    start = found.start()
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    raise HloSyntaxError(
        f"number too long ({found.end() - start} digits)",
        file=file,
        line=line,
        column=column,
        text=_line_text(text, line),
    )


def parse_module(text: str, *, file: str | None = None) -> Module:
    """Parse a whole HLO module (``HloModule name, ...`` and its computations)."""
    if not isinstance(text, str):
        raise HloSyntaxError("HLO text must be a str", file=file)
    _refuse_long_numbers(text, file)
    module_parser, _, builder = _parsers()
    builder.reset()
    builder.text = text
    # The parse allocates a few objects per instruction and frees none: the collector's passes
    # over them (and over everything else the process holds) find nothing, so it pauses.
    collecting = gc.isenabled()
    gc.disable()
    try:
        # ModelBuilder.module's result (lark types parse() as the Tree it returns untransformed)
        module = cast(Module, module_parser.parse(text))
    except Exception as error:
        raise _syntax_error(error, text, file) from None
    finally:
        if collecting:
            gc.enable()
        builder.reset()
    # XLA's parser verifies what it read; so does profan, before anything costs or caches it.
    verify_module(module, text=text, file=file)
    return module


def parse_instruction(line: str) -> Instruction:
    """Parse one instruction line as XProf or a dump shows it (``%x = f32[2]{0} add(...)...``)."""
    if not isinstance(line, str):
        raise HloSyntaxError("HLO text must be a str")
    _refuse_long_numbers(line, None)
    _, line_parser, builder = _parsers()
    builder.reset()
    builder.single_line = True
    try:
        return cast(Instruction, line_parser.parse(line.strip()))  # instruction_line's result
    except Exception as error:
        raise _syntax_error(error, line.strip(), None) from None
    finally:
        builder.reset()
