"""HLO text -> ``profan.hlo.model`` objects.

The syntax is in ``grammars/hlo.lark`` (LALR).  The model is built *during* the parse (Lark calls
``_ModelBuilder``'s methods as it reduces each rule), so no parse tree is ever materialised.
Shape tokens are decoded once per distinct text (``profan.hlo.shapes``); attribute values stay
raw text and are decoded on demand by the views on ``Instruction``.

Every failure becomes ``profan.errors.HloSyntaxError`` with file, line, column, the offending
line and what was expected.
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from profan.errors import HloSyntaxError
from profan.hlo.model import (
    Computation,
    FileLocation,
    Instruction,
    Module,
    Operand,
    Shape,
    StackFrame,
    StackFrameTables,
)
from profan.hlo.opcodes import ASYNC_SUFFIXES, NATIVE_ASYNC_OPCODES
from profan.hlo.shapes import UNKNOWN_SHAPE, decode_shape, infer_missing_shapes
from profan.hlo.text import unquote
from profan.hlo.views import CALLED_COMPUTATION_ATTRIBUTES
from profan.paths import grammar_path

_GRAMMAR_FILES = ("hlo.lark", "hlo_shape.lark")
# Attributes whose value names computations (or, written inline, holds one).
_COMPUTATION_ATTRIBUTES = frozenset(CALLED_COMPUTATION_ATTRIBUTES)
# What the grammar's _LEAD matches: blanks and comments before a token.
_LEAD = re.compile(r"(?:\s++|/\*(?:[^*]|\*(?!/))*+\*/|//[^\n]*+)*+")
_LEAD_CHARS = frozenset(" \t\r\n\f\v/")
_COMMENT = re.compile(r"/\*(?:[^*]|\*(?!/))*\*/|//[^\n]*")
# The start of an ATTR token: lead, ',', lead, the key, '=', lead.
_ATTR_KEY = re.compile(rf"{_LEAD.pattern},{_LEAD.pattern}([A-Za-z_][\w.\-]*)[ \t]*={_LEAD.pattern}")
_COMMENT_OR_STRING = re.compile(r'("(?:[^"\\]|\\.)*")|/\*(?:[^*]|\*(?!/))*\*/|//[^\n]*')
# An INSTR_HEAD token (after its lead): [ROOT] name = shape opcode(
_HEAD = re.compile(
    r"(ROOT\s+)?(%?[A-Za-z_][\w.\-]*)\s*=\s*(.*?\S)\s+([a-z][a-z0-9_\-]*)[ \t]*\(", re.S
)
# Attributes that stay on the async-start rather than moving to the wrapped op.
_ASYNC_ATTRIBUTES = frozenset(
    {"async_execution_thread", "metadata", "frontend_attributes", "control-predecessors"}
)
_INT_FIELD = re.compile(r"(\w+)=(-?\d+)")

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


def grammar_hash() -> str:
    """Hash of the grammar files: part of the parse-cache key."""
    digest = hashlib.sha256()
    for name in _GRAMMAR_FILES:
        digest.update(grammar_path(name).read_bytes())
    return digest.hexdigest()[:16]


class _Signature:
    """Marker for a computation's ``(params) -> shape`` (the model derives it from params)."""


_SIGNATURE = _Signature()


class _ModelBuilder:
    """Lark callbacks, one per grammar rule, each given the rule's children."""

    def __init__(self) -> None:
        self.inline_parser: Lark | None = None
        self.operand_item: re.Pattern[str] | None = None  # the grammar's OPERAND terminal
        self.attr_item: re.Pattern[str] | None = None  # the grammar's ATTR terminal
        self.operand_list: re.Pattern[str] | None = None  # OPERANDS without its attributes
        # the grammar's INSTR_HEAD terminal with groups: ROOT, name, shape, opcode
        self.instr_head: re.Pattern[str] | None = None
        self.reset()

    def reset(self) -> None:
        # Memo tables are per parse so a long-lived process does not grow without bound.
        self._operand_memo = {}
        self._operand_list_memo: dict[str, tuple[Operand, ...]] = {}
        self._shapes = {}
        self._pending: list[Instruction] = []  # unnamed instructions written as operands
        self._inline: list[Computation] = []  # computations written inline as attributes
        self._anonymous = 0
        self.single_line = False  # parse_instruction: elided and unnamed operands are kept

    # -- shapes -------------------------------------------------------------------------------
    def _shape(self, item: Any, anchor: Token | None = None) -> Shape:
        if isinstance(item, Shape):
            return item
        item = _value(item)
        shape = self._shapes.get(item)
        if shape is None:
            text = _bare(item)
            if " " in text or "\t" in text:
                text = "".join(text.split())
            try:
                shape = decode_shape(text)
            except HloSyntaxError as error:
                raise _error_at(anchor if anchor is not None else item, error.reason) from None
            self._shapes[item] = shape
        return shape

    def buffer_shape(self, children: list) -> Shape:
        return Shape("buffer", tuple_shapes=(self._shape(children[1]),))

    def tuple_shape(self, children: list) -> Shape:
        return Shape("tuple", tuple_shapes=tuple(self._shape(c) for c in children if c is not None))

    # -- instructions -------------------------------------------------------------------------
    def shape_operand(self, children: list) -> Operand:
        return Operand("", self._shape(children[0]))

    def tuple_operand(self, children: list) -> Operand:
        return Operand(_bare(children[1]).lstrip("%"), children[0])

    def _operand(self, token: Token | str, anchor: Token | None = None) -> Operand:
        token = _value(token)
        operand = self._operand_memo.get(token)
        if operand is None:
            text = _bare(token)
            if "[" not in text:
                operand = Operand(text.lstrip("%"), None)
            else:
                # shape, optional blanks, name: the name is the run after the shape's last ] or }
                split = max(text.rfind("]"), text.rfind("}")) + 1
                name = text[split:].strip().lstrip("%")
                operand = Operand(name, self._shape(text[:split], anchor or token))
            self._operand_memo[token] = operand
        return operand

    def _operand_list(
        self, token: Token | str, anchor: Token | None = None
    ) -> tuple[list[Operand], str]:
        """The operands of one OPERANDS token (``f32[2]{0} %a, %b), k=v``) and the text of
        the attributes that follow them."""
        assert self.operand_item is not None and self.operand_list is not None
        text = _value(token)
        if anchor is None:
            anchor = token  # type: ignore[assignment]
        end = self.operand_list.match(text).end()  # type: ignore[union-attr]
        operand_text = text[:end]
        # Operand lists repeat (`%param_0, %param_1)` in every fused computation): decode once.
        known = self._operand_list_memo.get(operand_text)
        if known is None and "[" not in operand_text and "/" not in operand_text:
            # names alone (`%a, %b)`): a split is enough
            body = operand_text[: operand_text.rindex(")")].strip()
            known = (
                tuple(Operand(item.strip().lstrip("%"), None) for item in body.split(","))
                if body
                else ()
            )
            self._operand_list_memo[operand_text] = known
        elif known is None:
            items = _COMMENT.sub(" ", operand_text) if "/" in operand_text else operand_text
            known = tuple(
                self._operand(match.group(0), anchor)
                for match in self.operand_item.finditer(items, 0, len(items) - 1)
            )
            self._operand_list_memo[operand_text] = known
        return list(known), text[end:]

    def instruction(self, children: list) -> Instruction | list[Instruction]:
        nested, self._pending = self._pending, []
        first = children[0]
        if first.type == "INSTRUCTION":
            # the whole line: split off `[ROOT] %name = shape opcode(` as INSTR_HEAD would
            text = _value(first)
            head = self.instr_head.match(text)  # type: ignore[union-attr]
            if head is None:  # the grammar's token and instr_head disagree: a bug
                raise _error_at(first, "cannot split the instruction head")
            head_end = head.end()
            root_word, name, shape_text, opcode = head.groups()
            is_root = root_word is not None
            shape = self._shape(shape_text, first)
            instruction = self._make(
                name.lstrip("%"), shape, opcode, first, [], operands_text=text[head_end:]
            )
        elif first.type == "INSTR_HEAD":
            # `[ROOT] %name = shape opcode(` in one token
            head = _HEAD.fullmatch(_bare(first))
            if head is None:  # the grammar's token and _HEAD disagree: a bug, reported as such
                raise _error_at(first, "cannot split the instruction head")
            root_word, name, shape_text, opcode = head.groups()
            is_root = root_word is not None
            shape = self._shape(shape_text, first)
            instruction = self._make(name.lstrip("%"), shape, opcode, first, children[1:])
        else:
            index = 0
            is_root = first.type == "ROOT"
            if is_root:
                index = 1
            name_token = children[index]
            name = _bare(name_token)[:-1].rstrip().lstrip("%")  # the token is `%name =`
            instruction = self._build(name, children[index + 1 :])
        instruction.is_root = is_root
        if nested:
            return [*nested, instruction]
        return instruction

    def nested_instruction(self, children: list) -> Operand:
        self._anonymous += 1
        opcode_token = (
            children[0]
            if _is_token(children[0]) and children[0].type in ("OPCODE", "CONSTANT")
            else children[1]
        )
        opcode = _bare(opcode_token)[:-1].rstrip()
        name = f"{opcode}.anonymous.{self._anonymous}"
        nested, self._pending = self._pending, []
        instruction = self._build(name, children)
        self._pending = [*nested, instruction]
        return Operand(name, instruction.shape)

    def _build(self, name: str, children: list) -> Instruction:
        first = children[0]
        if isinstance(first, Shape) or first.type == "SHAPE":
            shape = self._shape(first)
            children = children[1:]
        else:
            shape = UNKNOWN_SHAPE
        opcode_token = children[0]
        opcode = _bare(opcode_token)[:-1].rstrip()  # the token includes its '('
        return self._make(name, shape, opcode, opcode_token, children[1:])

    def _make(
        self,
        name: str,
        shape: Shape,
        opcode: str,
        opcode_token: Token,
        children: list,
        operands_text: str | None = None,
    ) -> Instruction:
        operands: list[Operand] = []
        attributes: dict[str, str] = {}
        if operands_text is not None:  # the OPERANDS part of an INSTRUCTION token
            operands, attribute_text = self._operand_list(operands_text, opcode_token)
            if attribute_text:
                self._attributes(name, opcode_token, attribute_text, attributes)
        literal = None
        elided = False
        elided_count = None
        for child in children:
            if isinstance(child, Operand):
                if child.name or self.single_line:
                    operands.append(child)
                # else a shape with no name: XLA's module parser drops it, and so do we
            elif child.type == "ELIDED":
                if not self.single_line:
                    raise _error_at(
                        child, "operands left out ('...') are accepted only in a single line"
                    )
                elided = True
                count = _bare(child)[3:]
                elided_count = int(count[2:-1]) if count else None
            elif child.type == "OPERANDS":
                listed, attribute_text = self._operand_list(child)
                operands.extend(listed)
                if attribute_text:
                    self._attributes(name, child, attribute_text, attributes)
            elif child.type == "OPERAND":
                operands.append(self._operand(child))
            elif child.type == "ATTRS":
                self._attributes(name, child, _value(child), attributes)
            elif child.type == "LITERAL":
                literal = _bare(child).strip()
                if "/*" in literal or "//" in literal:
                    literal = _strip_comments(literal)
        parameter_number = None
        if opcode == "parameter":
            if len(operands) != 1 or operands[0].shape is not None:
                raise _error_at(opcode_token, "parameter expects one parameter number")
            try:
                parameter_number = int(operands[0].name)
            except ValueError:
                raise _error_at(opcode_token, "parameter expects a parameter number") from None
            operands = []
        elif opcode == "constant" and literal is None:
            literal = ""
        return Instruction(
            name=name,
            opcode=opcode,
            shape=shape,
            operands=operands,
            attributes=attributes,
            literal=literal,
            parameter_number=parameter_number,
            operands_elided=elided,
            elided_operand_count=elided_count,
        )

    def _attributes(self, name: str, token: Token, text: str, attributes: dict) -> None:
        """Add the ``, key=value`` attributes in ``text`` (one or more ATTR matches)."""
        assert self.attr_item is not None
        key_at = _ATTR_KEY.match
        for match in self.attr_item.finditer(text):
            # `, key = value`: the key and where the value starts, in one match
            found = key_at(text, match.start())
            key = found.group(1)  # type: ignore[union-attr]
            value = text[found.end() : match.end()].rstrip()  # type: ignore[union-attr]
            if "/*" in value or "//" in value:
                value = _strip_comments(value)
            if key in attributes:
                raise _error_at(token, f"attribute {key!r} given twice")
            if key in _COMPUTATION_ATTRIBUTES and value.startswith("{") and "=" in value:
                value = self._inline_computation(f"{name}.{key}", token, value)
            attributes[key] = value

    def _inline_computation(self, name: str, token: Token, value: str) -> str:
        """Parse ``{ instructions }`` given as an attribute value; returns ``%name`` for it."""
        assert self.inline_parser is not None
        saved = self._pending
        self._pending = []
        try:
            body = self.inline_parser.parse(value[1:-1])
        except HloSyntaxError:
            raise
        except UnexpectedInput as error:
            line = (token.line or 1) + (error.line or 1) - 1
            raise HloSyntaxError(
                f"in the computation written inline: {type(error).__name__}",
                line=line,
                column=error.column if error.line != 1 else None,
            ) from None
        finally:
            self._pending = saved
        computation = self._computation(name, body, is_entry=False, execution_thread=None)
        self._inline.append(computation)
        return f"%{name}"

    def inline_body(self, children: list) -> list:
        return children

    def instruction_line(self, children: list) -> Instruction:
        found = children[0]
        return found[-1] if isinstance(found, list) else found

    # -- computations -------------------------------------------------------------------------
    def param(self, children: list) -> None:
        return None

    def signature(self, children: list) -> _Signature:
        return _SIGNATURE

    def computation(self, children: list) -> Computation:
        is_entry = _is_token(children[0]) and children[0].type == "ENTRY"
        name_token = children[1] if is_entry else children[0]
        name = _bare(name_token).lstrip("%")
        body: list = []
        execution_thread = None
        for child in children[2 if is_entry else 1 :]:
            if isinstance(child, Instruction | list):
                body.append(child)
            elif _is_token(child) and child.type == "ATTR":
                key, value = _split_attr(child)
                if key != "execution_thread" or execution_thread is not None:
                    raise _error_at(child, f"unexpected computation attribute {key!r}")
                if not value.startswith('"'):
                    raise _error_at(child, "execution_thread expects a quoted string")
                execution_thread = unquote(value)
        computation = self._computation(name, body, is_entry, execution_thread, name_token)
        inline, self._inline = self._inline, []
        return [*inline, computation] if inline else computation

    def _computation(
        self,
        name: str,
        body: list,
        is_entry: bool,
        execution_thread: str | None,
        name_token: Token | None = None,
    ) -> Computation:
        instructions: list[Instruction] = []
        for item in body:
            if isinstance(item, list):
                instructions.extend(item)
            else:
                instructions.append(item)
        if any("#" in o.name for i in instructions for o in i.operands):
            instructions = _with_implicit_elements(instructions)
        for instruction in instructions:
            instruction.computation = name
        if sum(i.is_root for i in instructions) > 1:
            raise _error_at(name_token, f"computation {name} has more than one ROOT")
        if any(i.shape is UNKNOWN_SHAPE for i in instructions):
            infer_missing_shapes(instructions)
        if any(i.opcode.endswith(ASYNC_SUFFIXES) for i in instructions):
            calls: dict[str, str] = {}  # async-start name -> the computation it calls
            for instruction in instructions:
                if instruction.opcode.endswith(ASYNC_SUFFIXES):
                    self._unsugar_async(instruction, calls)
        return Computation(name, instructions, is_entry, execution_thread)

    def _unsugar_async(self, instruction: Instruction, calls: dict[str, str]) -> None:
        """``X-start``/``X-update``/``X-done`` of an op with no async form of its own become
        async-start/-update/-done, the start calling a new computation that holds X, as XLA's
        parser does (so counts, called computations and costs match XLA's module)."""
        opcode = instruction.opcode
        if opcode in NATIVE_ASYNC_OPCODES:
            return
        if not opcode.endswith("-start"):
            instruction.opcode = "async-update" if opcode.endswith("-update") else "async-done"
            # Like XLA's printer, name the computation the async pair runs on both halves.
            called = calls.get(instruction.operands[0].name) if instruction.operands else None
            if called is not None and "calls" not in instruction.attributes:
                instruction.attributes["calls"] = called
                calls[instruction.name] = called
            return
        wrapped_opcode = opcode[: -len("-start")]
        shape = instruction.shape
        if not shape.is_tuple or len(shape.tuple_shapes) < 2:
            return  # not the async tuple form XLA expects: keep the op as written
        operand_shapes = shape.tuple_shapes[0]
        if operand_shapes.is_tuple and len(operand_shapes.tuple_shapes) == len(
            instruction.operands
        ):
            parameter_shapes = list(operand_shapes.tuple_shapes)
        else:
            parameter_shapes = [o.shape or UNKNOWN_SHAPE for o in instruction.operands]
        computation_name = f"wrapped_{wrapped_opcode}.{instruction.name}"
        parameters = [
            Instruction(
                name=f"{instruction.name}.param_{index}",
                opcode="parameter",
                shape=parameter_shape,
                parameter_number=index,
                computation=computation_name,
            )
            for index, parameter_shape in enumerate(parameter_shapes)
        ]
        kept = {k: v for k, v in instruction.attributes.items() if k in _ASYNC_ATTRIBUTES}
        moved = {k: v for k, v in instruction.attributes.items() if k not in _ASYNC_ATTRIBUTES}
        if "metadata" in kept:
            moved["metadata"] = kept["metadata"]
        wrapped = Instruction(
            name=f"{instruction.name}.{wrapped_opcode}",
            opcode=wrapped_opcode,
            shape=shape.tuple_shapes[1],
            operands=[Operand(p.name, None) for p in parameters],
            attributes=moved,
            is_root=True,
            computation=computation_name,
        )
        thread = kept.get("async_execution_thread")
        self._inline.append(
            Computation(
                computation_name,
                [*parameters, wrapped],
                False,
                unquote(thread) if thread and thread.startswith('"') else None,
            )
        )
        instruction.opcode = "async-start"
        instruction.attributes = {**kept, "calls": f"%{computation_name}"}
        calls[instruction.name] = f"%{computation_name}"

    # -- stack-frame tables -------------------------------------------------------------------
    def file_names(self, children: list) -> tuple[str, dict]:
        return "file_names", _id_table(children, unquote)

    def function_names(self, children: list) -> tuple[str, dict]:
        return "function_names", _id_table(children, unquote)

    def file_locations(self, children: list) -> tuple[str, dict]:
        def row(token: Token) -> FileLocation:
            fields = _int_fields(token)
            try:
                return FileLocation(
                    file_name_id=fields.pop("file_name_id"),
                    function_name_id=fields.pop("function_name_id"),
                    line=fields.pop("line"),
                    end_line=fields.pop("end_line", None),
                    column=fields.pop("column", None),
                    end_column=fields.pop("end_column", None),
                )
            except KeyError as missing:
                raise _error_at(token, f"file location lacks {missing.args[0]}") from None

        return "file_locations", _id_table(children, row)

    def stack_frames(self, children: list) -> tuple[str, dict]:
        def row(token: Token) -> StackFrame:
            fields = _int_fields(token)
            if "file_location_id" not in fields:
                raise _error_at(token, "stack frame lacks file_location_id")
            return StackFrame(fields["file_location_id"], fields.get("parent_frame_id", 0))

        return "stack_frames", _id_table(children, row)

    # -- module -------------------------------------------------------------------------------
    def module(self, children: list) -> Module:
        name = ""  # no HloModule header
        if children and _is_token(children[0]) and children[0].type == "HLOMODULE":
            name = _bare(children[1])
        else:
            children = [None, None, *children]
        attributes: dict[str, str] = {}
        computations: list[Computation] = []
        tables = StackFrameTables()
        seen: set[str] = set()
        for child in children[2:]:
            if isinstance(child, Computation | list):
                for computation in child if isinstance(child, list) else [child]:
                    if computation.name in seen:
                        raise HloSyntaxError(f"computation {computation.name} defined twice")
                    seen.add(computation.name)
                    computations.append(computation)
            elif isinstance(child, tuple):
                table, rows = child
                getattr(tables, table).update(rows)
            elif _is_token(child) and child.type == "ATTR":
                key, value = _split_attr(child)
                if key in attributes:
                    raise _error_at(child, f"module attribute {key!r} given twice")
                attributes[key] = value
        if sum(c.is_entry for c in computations) > 1:
            raise HloSyntaxError("more than one ENTRY computation")
        if not computations:
            raise HloSyntaxError("module has no computations")
        return Module(name, computations, attributes, tables)


def _with_implicit_elements(instructions: list[Instruction]) -> list[Instruction]:
    """Add the get-tuple-element behind each ``%name#N`` operand (named ``name#N``, marked
    implicit), right after the instruction whose tuple it reads; its shape is that element's."""
    shapes = {i.name: i.shape for i in instructions}
    wanted: dict[str, list[Instruction]] = {}
    for instruction in instructions:
        for operand in instruction.operands:
            if "#" not in operand.name or operand.name in shapes:
                continue
            source, _, index_text = operand.name.rpartition("#")
            shape = shapes.get(source)
            index = int(index_text)
            if shape is not None and shape.is_tuple and index < len(shape.tuple_shapes):
                element = shape.tuple_shapes[index]
            else:
                element = UNKNOWN_SHAPE
            element_instruction = Instruction(
                operand.name,
                "get-tuple-element",
                element,
                [Operand(source, None)],
                {"index": index_text},
                implicit=True,
            )
            shapes[operand.name] = element
            wanted.setdefault(source, []).append(element_instruction)
    out: list[Instruction] = []
    for instruction in instructions:
        out.append(instruction)
        out.extend(wanted.pop(instruction.name, ()))
    for leftover in wanted.values():  # elements of a name the computation does not define
        out[:0] = leftover
    return out


def _is_token(item: Any) -> bool:
    return hasattr(item, "type") and hasattr(item, "value")


def _value(token: Any) -> str:
    """A token's text (Lark's tokens are str; lark-cython's carry it in ``value``)."""
    return token if type(token) is str else token.value


def _bare(token: Any) -> str:
    """A token's text without the blanks and comments the grammar lets lead it."""
    text = token if type(token) is str else token.value
    if text and text[0] in _LEAD_CHARS:
        text = text[_LEAD.match(text).end() :]  # type: ignore[union-attr]
    return text


def _split_attr(token: Token) -> tuple[str, str]:
    text = _bare(token)[1:]  # drop the ','
    if text and text[0] in _LEAD_CHARS:
        text = _bare(text)
    equals = text.index("=")
    value = text[equals + 1 :]
    if value and value[0] in _LEAD_CHARS:
        value = _bare(value)  # blanks and comments between '=' and the value
    value = value.rstrip()
    if "/*" in value or "//" in value:
        value = _strip_comments(value)
    return text[:equals].rstrip(), value


def _strip_comments(text: str) -> str:
    """``text`` without the comments outside its quoted strings (XLA prints ``/*index=5*/``
    inside long braced values; comments are not part of a value)."""
    return _COMMENT_OR_STRING.sub(lambda m: m.group(1) or "", text)


def _int_fields(token: Token) -> dict[str, int]:
    return {key: int(value) for key, value in _INT_FIELD.findall(_value(token))}


def _id_table(children: list, convert: Any) -> dict:
    rows: dict = {}
    for id_token, value in zip(children[1::2], children[2::2], strict=True):
        rows[int(_bare(id_token))] = convert(_bare(value))
    return rows


def _position(token: Any) -> tuple[int | None, int | None]:
    """Line and column of a token's text proper (after its leading blanks and comments)."""
    line = getattr(token, "line", None)
    column = getattr(token, "column", None)
    text = _value(token)
    if line is None or column is None or not text or text[0] not in _LEAD_CHARS:
        return line, column
    lead = text[: _LEAD.match(text).end()]  # type: ignore[union-attr]
    newlines = lead.count("\n")
    if newlines:
        return line + newlines, len(lead) - lead.rindex("\n")
    return line, column + len(lead)


def _error_at(token: Any, reason: str) -> HloSyntaxError:
    line, column = _position(token)
    return HloSyntaxError(reason, line=line, column=column)


def _speedups() -> dict | None:
    """lark-cython's plugins when installed (about 20% faster); PROFAN_PURE_PYTHON=1 opts out."""
    if os.environ.get("PROFAN_PURE_PYTHON"):
        return None
    try:
        import lark_cython  # type: ignore[import-not-found]
    except ImportError:
        return None
    return lark_cython.plugins


def parser_backend() -> str:
    """``"lark-cython"`` or ``"lark"``: which LALR implementation parses."""
    return "lark-cython" if _speedups() else "lark"


def _variant(cache_file: Path | None, suffix: str) -> str | bool:
    return str(cache_file.with_suffix(suffix)) if cache_file else False


@lru_cache(maxsize=1)
def _parsers() -> tuple[Lark, Lark, _ModelBuilder]:
    from profan.paths import cache_dir

    grammar = grammar_path("hlo.lark").read_text()
    builder = _ModelBuilder()
    plugins = _speedups()
    flavour = "cython" if plugins else "python"
    try:
        cache_file: Path | None = cache_dir("lark") / f"hlo-{grammar_hash()}-{flavour}.lark"
    except OSError:  # no writable cache directory: build the tables every time
        cache_file = None
    options: dict[str, Any] = dict(
        parser="lalr",
        lexer="contextual",
        transformer=builder,
        maybe_placeholders=False,
        propagate_positions=False,
        cache=str(cache_file) if cache_file else False,
    )
    if plugins:
        options["_plugins"] = plugins
    module_parser = Lark(grammar, start="module", **options)
    builder.operand_item = re.compile(module_parser.get_terminal("OPERAND").pattern.to_regexp())
    builder.attr_item = re.compile(module_parser.get_terminal("ATTR").pattern.to_regexp())
    shape = module_parser.get_terminal("SHAPE").pattern.to_regexp()
    builder.instr_head = re.compile(
        rf"{_LEAD.pattern}(ROOT\s+)?(%?[A-Za-z_][\w.\-]*)\s*=\s*({shape})"
        r"\s+(?!constant[ \t]*\()([a-z][a-z0-9_\-]*)[ \t]*\("
    )
    operand = module_parser.get_terminal("OPERAND").pattern.to_regexp()
    lead = _LEAD.pattern
    builder.operand_list = re.compile(f"(?:{operand}(?:{lead},{operand})*)?{lead}\\)")
    builder.inline_parser = Lark(
        grammar,
        start="inline_body",
        **{**options, "cache": _variant(cache_file, ".inline.lark")},
    )
    line_parser = Lark(
        grammar,
        start="instruction_line",
        **{**options, "cache": _variant(cache_file, ".line.lark")},
    )
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


def _translate(error: Exception, text: str, file: str | None) -> HloSyntaxError:
    """Any failure during a parse, as an ``HloSyntaxError``."""
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
        lines = text.rstrip().split("\n")
        return HloSyntaxError(
            "unexpected end of input",
            file=file,
            line=len(lines),
            column=len(lines[-1]) + 1 if lines else 1,
            text=lines[-1][:300] if lines else "",
            expected=_expected_names(error.expected),
        )
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type in ("$END", "_TRAILER"):
            lines = text.rstrip().split("\n")
            return HloSyntaxError(
                "unexpected end of input",
                file=file,
                line=len(lines),
                column=len(lines[-1]) + 1,
                text=lines[-1][:300],
                expected=_expected_names(error.expected),
            )
        shown = _bare(token)
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        line, column = _position(token)
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
        at = _LEAD.match(text, error.pos_in_stream).end()  # type: ignore[union-attr]
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
    if isinstance(error, RecursionError):
        return HloSyntaxError("input nested too deeply", file=file)
    return HloSyntaxError(f"could not build the model ({type(error).__name__}: {error})", file=file)


def _unwrap(error: Exception) -> Exception:
    # Lark wraps exceptions raised inside callbacks in VisitError on some paths.
    inner = getattr(error, "orig_exc", None)
    return inner if isinstance(inner, Exception) else error


def parse_module(text: str, *, file: str | None = None) -> Module:
    """Parse a whole HLO module (``HloModule name, ...`` and its computations)."""
    if not isinstance(text, str):
        raise HloSyntaxError("HLO text must be a str", file=file)
    module_parser, _, builder = _parsers()
    builder.reset()
    try:
        module = module_parser.parse(text)
    except Exception as error:
        raise _translate(_unwrap(error), text, file) from None
    finally:
        builder.reset()
    return module


def parse_instruction(line: str) -> Instruction:
    """Parse one instruction line as XProf or a dump shows it (``%x = f32[2]{0} add(...)...``)."""
    if not isinstance(line, str):
        raise HloSyntaxError("HLO text must be a str")
    _, line_parser, builder = _parsers()
    builder.reset()
    builder.single_line = True
    try:
        return line_parser.parse(line.strip())
    except Exception as error:
        raise _translate(_unwrap(error), line.strip(), None) from None
    finally:
        builder.reset()
