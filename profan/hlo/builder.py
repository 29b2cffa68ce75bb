"""Lark callbacks that build ``profan.hlo.model`` objects while the parser reduces each rule.

The model is built *during* the parse, so no parse tree is ever materialised.  Shape tokens are
decoded once per distinct text (``profan.hlo.shapes``); attribute values stay raw text, decoded
on demand by ``profan.hlo.views``.
"""

from __future__ import annotations

import re
from typing import Any, cast

from lark import Lark, Token
from lark.exceptions import UnexpectedInput

from profan.errors import HloSyntaxError
from profan.hlo.async_sugar import unsugar_async
from profan.hlo.inference import SHAPE_INFERABLE_OPCODES, infer_missing_shapes
from profan.hlo.model import (
    UNKNOWN_SHAPE,
    Computation,
    FileLocation,
    Instruction,
    Module,
    Operand,
    Shape,
    StackFrame,
    StackFrameTables,
)
from profan.hlo.opcodes import ASYNC_SUFFIXES
from profan.hlo.resolve import check_names, unique_computation_names, with_implicit_elements
from profan.hlo.shapes import decode_shape
from profan.hlo.text import unquote
from profan.hlo.tokens import (
    COMMENT,
    LEAD,
    bare,
    error_at,
    id_table,
    int_fields,
    is_token,
    split_attr,
    strip_comments,
    value_of,
)
from profan.hlo.views import CALLED_COMPUTATION_ATTRIBUTES

# Attributes whose value names computations (or, written inline, holds one).
_COMPUTATION_ATTRIBUTES = frozenset(CALLED_COMPUTATION_ATTRIBUTES)
# The start of an ATTR token: lead, ',', lead, the key, '=', lead.
_ATTR_KEY = re.compile(rf"{LEAD.pattern},{LEAD.pattern}([A-Za-z_][\w.\-]*)[ \t]*={LEAD.pattern}")
# What surrounds an attribute's key: the comma and blanks before it, blanks before its '='.
_KEY_BLANKS = " \t\r\n\f\v,"
# An INSTR_HEAD token (after its lead): [ROOT] name = shape opcode(
_HEAD = re.compile(
    r"(ROOT\s+)?(%?[A-Za-z_][\w.\-]*)\s*=\s*(.*?\S)\s+([a-z][a-z0-9_\-]*)[ \t]*\(", re.S
)


class _Signature:
    """Marker for a computation's ``(params) -> shape`` (the model derives it from params)."""


_SIGNATURE = _Signature()


def _read_to_the_end(text: str, end: int, terminal: str) -> None:
    """A token the builder read only up to ``end``: the grammar and the builder's patterns
    disagree (a bug in profan, never silently dropped text)."""
    if end != len(text):
        raise RuntimeError(f"the builder read {terminal} only up to {text[end : end + 80]!r}")


class _LineAnchor:
    """Where one line of an INSTRUCTIONS token starts, placed like a token of its own when an
    error needs its line and column (only then is the position worked out)."""

    __slots__ = ("offset", "token")

    def __init__(self, token: Token, offset: int) -> None:
        self.token = token
        self.offset = offset

    @property
    def value(self) -> str:
        return value_of(self.token)[self.offset :]

    @property
    def line(self) -> int | None:
        line = getattr(self.token, "line", None)
        return None if line is None else line + value_of(self.token).count("\n", 0, self.offset)

    @property
    def column(self) -> int | None:
        column = getattr(self.token, "column", None)
        text = value_of(self.token)
        newline = text.rfind("\n", 0, self.offset)
        if newline >= 0:
            return self.offset - newline
        return None if column is None else column + self.offset


class ModelBuilder:
    """Lark callbacks, one per grammar rule, each given the rule's children."""

    def __init__(self) -> None:
        self.inline_parser: Lark | None = None
        self.operand_item: re.Pattern[str] | None = None  # the grammar's OPERAND terminal
        self.attr_item: re.Pattern[str] | None = None  # the grammar's ATTR terminal
        self.operand_list: re.Pattern[str] | None = None  # OPERANDS without its attributes
        # the grammar's INSTR_HEAD terminal with groups: ROOT, name, shape, opcode
        self.instr_head: re.Pattern[str] | None = None
        # one array shape of a tuple in a head, and the ',' or ')' after it
        self.tuple_element: re.Pattern[str] | None = None
        self.reset()

    def reset(self) -> None:
        # Memo tables are per parse so a long-lived process does not grow without bound.
        self._operand_memo: dict[str, Operand] = {}
        self._operand_list_memo: dict[str, tuple[Operand, ...]] = {}
        self._shapes: dict[str, Shape] = {}
        self._pending: list[Instruction] = []  # unnamed instructions written as operands
        self._inline: list[Computation] = []  # computations written inline as attributes
        self._anonymous = 0
        self.single_line = False  # parse_instruction: elided and unnamed operands are kept
        self.text: str | None = None  # the module's text, to place errors found after a rule
        self._computations: dict[str, Computation] = {}  # built so far, by name
        # computations profan makes (inline attributes, async wrappers) -> where they are called
        self._generated: dict[int, list[tuple[dict[str, str], str]]] = {}
        self._wrappers: dict[str, int] = {}  # "%name" of an async wrapper -> its id
        self._predecessors = False  # a control-predecessors attribute was read

    # -- shapes -------------------------------------------------------------------------------
    def _shape(self, item: Any, anchor: Token | str | None = None) -> Shape:
        if isinstance(item, Shape):
            return item
        item = value_of(item)
        shape = self._shapes.get(item)
        if shape is None:
            text = bare(item)
            if text.startswith("("):
                shape = self._shapes[item] = self._tuple_shape(text, anchor)
                return shape
            if " " in text or "\t" in text or "\n" in text or "/" in text:
                # XLA's lexer skips blanks and comments between a shape's tokens
                text = "".join(strip_comments(text).split())
            try:
                shape = decode_shape(text)
            except HloSyntaxError as error:
                raise error_at(anchor if anchor is not None else item, error.reason) from None
            self._shapes[item] = shape
        return shape

    def _tuple_shape(self, text: str, anchor: Any) -> Shape:
        """A tuple of array shapes written in an instruction's head: `(f32[2]{0}, s32[])`."""
        assert self.tuple_element is not None
        elements = []
        at = text.index("(") + 1
        element = self.tuple_element.match(text, at)
        while element is not None:
            elements.append(self._shape(element.group(1), anchor))
            if element.group(2) == ")":
                break
            element = self.tuple_element.match(text, element.end())
        else:  # no element: `()`
            if LEAD.match(text, at).end() != len(text) - 1:  # type: ignore[union-attr]
                raise RuntimeError(f"the grammar's head and tuple_element disagree on {text!r}")
        return Shape("tuple", tuple_shapes=tuple(elements))

    def buffer_shape(self, children: list[Any]) -> Shape:
        return Shape("buffer", tuple_shapes=(self._shape(children[1]),))

    def tuple_shape(self, children: list[Any]) -> Shape:
        return Shape("tuple", tuple_shapes=tuple(self._shape(c) for c in children if c is not None))

    # -- instructions -------------------------------------------------------------------------
    def shape_operand(self, children: list[Any]) -> Operand:
        return Operand("", self._shape(children[0]))

    def tuple_operand(self, children: list[Any]) -> Operand:
        return Operand(bare(children[1]).lstrip("%"), children[0])

    def _operand(self, token: Token | str, anchor: Token | None = None) -> Operand:
        token = value_of(token)
        operand = self._operand_memo.get(token)
        if operand is None:
            text = bare(token)
            if "[" not in text:
                operand = Operand(text.lstrip("%"), None)
            else:
                # shape, optional blanks, name: the name is the run after the shape's last ] or }
                split = max(text.rfind("]"), text.rfind("}")) + 1
                name = text[split:].strip().lstrip("%")
                operand = Operand(name, self._shape(text[:split], anchor or token))
            self._operand_memo[token] = operand
        return operand

    def _operand_list(self, text: str, start: int, anchor: Any) -> tuple[list[Operand], int]:
        """The operands written in ``text`` from ``start`` (just past the opcode's '(') to
        their ')', and where the text after that ')' starts (its attributes)."""
        assert self.operand_item is not None and self.operand_list is not None
        close = text.find(")", start)
        listed = text[start:close]
        if close >= 0 and "[" not in listed and "/" not in listed:
            # names alone (`%a, %b`): with no shape or comment the first ')' closes the list.
            # Lists repeat (`%param_0, %param_1` in every fused computation): decode once.
            known = self._operand_list_memo.get(listed)
            if known is None:
                items = listed.split(",") if listed and not listed.isspace() else ()
                known = tuple([Operand(item.strip().lstrip("%"), None) for item in items])
                self._operand_list_memo[listed] = known
            return list(known), close + 1
        end = self.operand_list.match(text, start).end()  # type: ignore[union-attr]
        listed = text[start:end]
        known = self._operand_list_memo.get(listed)
        if known is None:
            items_text = COMMENT.sub(" ", listed) if "/" in listed else listed
            known = tuple(
                self._operand(match.group(0), anchor)
                for match in self.operand_item.finditer(items_text, 0, len(items_text) - 1)
            )
            self._operand_list_memo[listed] = known
        return list(known), end

    def instruction(self, children: list[Any]) -> Instruction | list[Instruction]:
        nested, self._pending = self._pending, []
        first = children[0]
        if first.type == "INSTR_HEAD":
            # `[ROOT] %name = shape opcode(` in one token
            head = _HEAD.fullmatch(bare(first))
            if head is None:
                raise RuntimeError(f"the grammar's INSTR_HEAD and _HEAD disagree on {first!r}")
            root_word, name, shape_text, opcode = head.groups()
            shape = self._shape(shape_text, first)
            instruction = self._make(name.lstrip("%"), shape, opcode, first, children[1:])
            instruction.is_root = root_word is not None
        else:
            index = 0
            is_root = first.type == "ROOT"
            if is_root:
                index = 1
            name_token = children[index]
            name = bare(name_token)[:-1].rstrip().lstrip("%")  # the token is `%name =`
            instruction = self._build(name, children[index + 1 :])
            instruction.is_root = is_root
        if nested:
            return [*nested, instruction]
        return instruction

    def instructions(self, children: list[Any]) -> list[Instruction]:
        """A run of INSTRUCTION lines in one INSTRUCTIONS token, read line by line."""
        token = children[0]
        text = value_of(token)
        found = []
        at = 0
        while at < len(text):
            instruction, at = self._whole_line(text, at, _LineAnchor(token, at))
            found.append(instruction)
        return found

    def _whole_line(self, text: str, at: int, anchor: Any) -> tuple[Instruction, int]:
        """The instruction of the INSTRUCTION line at ``at`` in ``text``, and where it ends:
        `[ROOT] %name = shape opcode(` (split off as INSTR_HEAD would be), a names-only or
        plain operand list, attributes.  Errors are placed at ``anchor``."""
        head = self.instr_head.match(text, at)  # type: ignore[union-attr]
        if head is None:
            line = text[at : at + 200]
            raise RuntimeError(f"the grammar's INSTRUCTION and instr_head disagree on {line!r}")
        root_word, name, shape_text, opcode = head.groups()
        shape = self._shapes.get(shape_text)
        if shape is None:
            shape = self._shape(shape_text, anchor)
        name = name.lstrip("%")
        operands, at = self._operand_list(text, head.end(), anchor)
        attributes: dict[str, str] = {}
        at = self._attributes(name, anchor, text, at, attributes)
        if opcode == "parameter" or opcode == "constant":
            instruction = self._make(name, shape, opcode, anchor, [], operands, attributes)
            instruction.is_root = root_word is not None
            return instruction, at
        return Instruction(name, opcode, shape, operands, attributes, root_word is not None), at

    def nested_instruction(self, children: list[Any]) -> Operand:
        self._anonymous += 1
        opcode_token = (
            children[0]
            if is_token(children[0]) and children[0].type in ("OPCODE", "CONSTANT")
            else children[1]
        )
        opcode = bare(opcode_token)[:-1].rstrip()
        name = f"{opcode}.anonymous.{self._anonymous}"
        nested, self._pending = self._pending, []
        instruction = self._build(name, children)
        self._pending = [*nested, instruction]
        # a shape the text left out is inferred later: the operand then reads it by name
        return Operand(name, None if instruction.shape is UNKNOWN_SHAPE else instruction.shape)

    def _build(self, name: str, children: list[Any]) -> Instruction:
        first = children[0]
        if isinstance(first, Shape) or first.type == "SHAPE":
            shape = self._shape(first)
            children = children[1:]
        else:
            shape = UNKNOWN_SHAPE
        opcode_token = children[0]
        opcode = bare(opcode_token)[:-1].rstrip()  # the token includes its '('
        if shape is UNKNOWN_SHAPE and opcode not in SHAPE_INFERABLE_OPCODES:
            raise error_at(opcode_token, f"cannot infer shape for opcode: {opcode}")
        return self._make(name, shape, opcode, opcode_token, children[1:])

    def _make(
        self,
        name: str,
        shape: Shape,
        opcode: str,
        opcode_token: Token,
        children: list[Any],
        operands: list[Operand] | None = None,
        attributes: dict[str, str] | None = None,
    ) -> Instruction:
        """An instruction from the children of its rule (after the opcode), or from the
        ``operands`` and ``attributes`` already read off an INSTRUCTION token."""
        if operands is None:
            operands = []
        if attributes is None:
            attributes = {}
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
                    raise error_at(
                        child, "operands left out ('...') are accepted only in a single line"
                    )
                elided = True
                count = bare(child)[3:]
                elided_count = int(count[2:-1]) if count else None
            elif child.type == "OPERANDS":
                text = value_of(child)
                listed, end = self._operand_list(text, 0, child)
                operands.extend(listed)
                end = self._attributes(name, child, text, end, attributes)
                _read_to_the_end(text, end, "OPERANDS")
            elif child.type == "OPERAND":
                operands.append(self._operand(child))
            elif child.type == "ATTRS":
                text = value_of(child)
                _read_to_the_end(text, self._attributes(name, child, text, 0, attributes), "ATTRS")
            elif child.type == "LITERAL":
                literal = bare(child).strip()
                if "/*" in literal or "//" in literal:
                    literal = strip_comments(literal)
        parameter_number = None
        if opcode == "parameter":
            if len(operands) != 1 or operands[0].shape is not None:
                raise error_at(opcode_token, "parameter expects one parameter number")
            try:
                parameter_number = int(operands[0].name)
            except ValueError:
                raise error_at(opcode_token, "parameter expects a parameter number") from None
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

    def _attributes(
        self, name: str, token: Any, text: str, at: int, attributes: dict[str, str]
    ) -> int:
        """Add the ``, key=value`` attributes written one after another in ``text`` from
        ``at``; returns where they end."""
        assert self.attr_item is not None
        attribute_at = self.attr_item.match
        key_at = _ATTR_KEY.match
        find = text.find
        match = attribute_at(text, at)
        while match is not None:
            start, at = match.span()
            # `, key=value`: the key runs to the first '=' unless a comment leads it
            equals = find("=", start, at)
            key = text[start:equals].strip(_KEY_BLANKS)
            if "/" in key:
                found = key_at(text, start)
                key = found.group(1)  # type: ignore[union-attr]
                equals = found.end() - 1  # type: ignore[union-attr]
            value = text[equals + 1 : at].strip()
            if "/" in value and ("/*" in value or "//" in value):
                value = strip_comments(value).strip()
            if key in attributes:
                raise error_at(token, f"attribute {key!r} given twice")
            if key == "control-predecessors":
                self._predecessors = True
            elif key in _COMPUTATION_ATTRIBUTES and value.startswith("{") and "=" in value:
                value = self._inline_computation(f"{name}.{key}", token, value)
                self._generated[id(self._inline[-1])] = [(attributes, key)]
            attributes[key] = value
            match = attribute_at(text, at)
        return at

    def _inline_computation(self, name: str, token: Token, value: str) -> str:
        """Parse ``{ instructions }`` given as an attribute value; returns ``%name`` for it."""
        assert self.inline_parser is not None
        saved = self._pending
        self._pending = []
        try:
            # what inline_body made of it (lark types parse() as the Tree it returns untransformed)
            body = cast(list[Any], self.inline_parser.parse(value[1:-1]))
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

    def inline_body(self, children: list[Any]) -> list[Any]:
        return children

    def instruction_line(self, children: list[Any]) -> Instruction:
        found = children[0]
        if is_token(found):  # INSTRUCTION
            text = value_of(found)
            found, end = self._whole_line(text, 0, found)
            _read_to_the_end(text, end, "INSTRUCTION")
        instruction: Instruction = found[-1] if isinstance(found, list) else found
        if instruction.shape is UNKNOWN_SHAPE:  # from the operand shapes the line printed
            infer_missing_shapes([instruction], lambda name: None)
        return instruction

    # -- computations -------------------------------------------------------------------------
    def param(self, children: list[Any]) -> None:
        return None

    def signature(self, children: list[Any]) -> _Signature:
        return _SIGNATURE

    def computation(self, children: list[Any]) -> Computation | list[Computation]:
        """The computation, after the computations written inline in its attributes."""
        is_entry = is_token(children[0]) and children[0].type == "ENTRY"
        name_token = children[1] if is_entry else children[0]
        name = bare(name_token).lstrip("%")
        body: list[Any] = []
        execution_thread = None
        for child in children[2 if is_entry else 1 :]:
            if isinstance(child, Instruction | list):
                body.append(child)
            elif is_token(child) and child.type == "ATTR":
                key, value = split_attr(child)
                if key != "execution_thread" or execution_thread is not None:
                    raise error_at(child, f"unexpected computation attribute {key!r}")
                if not value.startswith('"'):
                    raise error_at(child, "execution_thread expects a quoted string")
                execution_thread = unquote(value)
        computation = self._computation(name, body, is_entry, execution_thread, name_token)
        inline, self._inline = self._inline, []
        return [*inline, computation] if inline else computation

    def _computation(
        self,
        name: str,
        body: list[Any],
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
        used = {operand.name for i in instructions for operand in i.operands}
        if any("#" in operand for operand in used):
            instructions = with_implicit_elements(instructions, self.text, name)
        check_names(instructions, used, self.text, name, self._predecessors)
        for instruction in instructions:
            instruction.computation = name
        if sum(i.is_root for i in instructions) > 1:
            raise error_at(name_token, f"computation {name} has more than one ROOT")
        if any(i.shape is UNKNOWN_SHAPE for i in instructions):
            infer_missing_shapes(instructions, self._root_shape)
        if any(i.opcode.endswith(ASYNC_SUFFIXES) for i in instructions):
            calls: dict[str, str] = {}  # async-start name -> the computation it calls
            shapes = {i.name: i.shape for i in instructions}
            for instruction in instructions:
                if instruction.opcode.endswith(ASYNC_SUFFIXES):
                    made = unsugar_async(
                        instruction, calls, shapes, self._wrappers, self._generated
                    )
                    if made is not None:
                        self._inline.append(made)
        computation = Computation(name, instructions, is_entry, execution_thread)
        self._computations.setdefault(name, computation)
        return computation

    def _root_shape(self, name: str) -> Shape | None:
        """The root shape of a computation parsed before (XLA's parser requires callees to be
        defined before their callers)."""
        computation = self._computations.get(name)
        return (
            computation.root.shape if computation is not None and computation.instructions else None
        )

    # -- stack-frame tables -------------------------------------------------------------------
    def file_names(self, children: list[Any]) -> tuple[str, dict[int, Any]]:
        return "file_names", id_table(children, lambda token: unquote(bare(token)))

    def function_names(self, children: list[Any]) -> tuple[str, dict[int, Any]]:
        return "function_names", id_table(children, lambda token: unquote(bare(token)))

    def file_locations(self, children: list[Any]) -> tuple[str, dict[int, Any]]:
        def row(token: Token) -> FileLocation:
            fields = int_fields(token)
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
                raise error_at(token, f"file location lacks {missing.args[0]}") from None

        return "file_locations", id_table(children, row)

    def stack_frames(self, children: list[Any]) -> tuple[str, dict[int, Any]]:
        def row(token: Token) -> StackFrame:
            fields = int_fields(token)
            if "file_location_id" not in fields:
                raise error_at(token, "stack frame lacks file_location_id")
            return StackFrame(fields["file_location_id"], fields.get("parent_frame_id", 0))

        return "stack_frames", id_table(children, row)

    # -- module -------------------------------------------------------------------------------
    def module(self, children: list[Any]) -> Module:
        name = ""  # no HloModule header
        if children and is_token(children[0]) and children[0].type == "HLOMODULE":
            name = bare(children[1])
        else:
            children = [None, None, *children]
        attributes: dict[str, str] = {}
        computations: list[Computation] = []
        tables = StackFrameTables()
        for child in children[2:]:
            if isinstance(child, Computation | list):
                computations.extend(child if isinstance(child, list) else [child])
            elif isinstance(child, tuple):
                table, rows = child
                getattr(tables, table).update(rows)
            elif is_token(child) and child.type == "ATTR":
                key, value = split_attr(child)
                if key in attributes:
                    raise error_at(child, f"module attribute {key!r} given twice")
                attributes[key] = value
        if sum(c.is_entry for c in computations) > 1:
            raise HloSyntaxError("more than one ENTRY computation")
        if not computations:
            raise HloSyntaxError("module has no computations")
        unique_computation_names(computations, self._generated, self.text)
        return Module(name, computations, attributes, tables)
