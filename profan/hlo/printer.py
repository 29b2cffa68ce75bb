"""``Module`` -> HLO text that parses back to an equal model."""

from __future__ import annotations

from profan.hlo.model import UNKNOWN_SHAPE, Computation, Instruction, Module, Operand, Shape
from profan.hlo.shapes import shape_to_text
from profan.hlo.text import quote


def type_text(shape: Shape) -> str:
    """A shape as printed, including the ``b(...)`` buffer form."""
    if shape.dtype == "buffer" and len(shape.tuple_shapes) == 1:
        return f"b({type_text(shape.tuple_shapes[0])})"
    if shape.is_tuple:
        return "(" + ", ".join(type_text(s) for s in shape.tuple_shapes) + ")"
    return shape_to_text(shape)


def _operand_text(operand: Operand) -> str:
    if operand.shape is None:
        return f"%{operand.name}"
    if not operand.name:  # a shape with no name (single lines only)
        return type_text(operand.shape)
    return f"{type_text(operand.shape)} %{operand.name}"


def instruction_to_text(instruction: Instruction) -> str:
    parts = ["ROOT " if instruction.is_root else "", f"%{instruction.name} = "]
    if instruction.shape is not UNKNOWN_SHAPE and instruction.shape.dtype != "unknown":
        parts.append(type_text(instruction.shape) + " ")
    if instruction.opcode == "parameter":
        arguments = str(instruction.parameter_number)
    elif instruction.literal is not None:
        arguments = instruction.literal
    else:
        shown = [_operand_text(o) for o in instruction.operands]
        if instruction.operands_elided:
            count = instruction.elided_operand_count
            shown.append("..." if count is None else f"...(+{count})")
        arguments = ", ".join(shown)
    parts.append(f"{instruction.opcode}({arguments})")
    for key, value in instruction.attributes.items():
        parts.append(f", {key}={value}")
    return "".join(parts)


def _signature(computation: Computation) -> str:
    params = computation.params
    shapes = [p.shape for p in params] + [computation.root.shape]
    if any(s.dtype == "unknown" for s in shapes):
        return ""
    listed = ", ".join(f"{p.name}: {type_text(p.shape)}" for p in params)
    return f" ({listed}) -> {type_text(computation.root.shape)}"


def computation_to_text(computation: Computation) -> str:
    head = "ENTRY " if computation.is_entry else ""
    lines = [f"{head}%{computation.name}{_signature(computation)} {{"]
    lines.extend("  " + instruction_to_text(i) for i in computation.instructions if not i.implicit)
    tail = "}"
    if computation.execution_thread is not None:
        tail += f", execution_thread={quote(computation.execution_thread)}"
    lines.append(tail)
    return "\n".join(lines)


def _tables_text(module: Module) -> list[str]:
    tables = module.stack_frames
    blocks: list[str] = []
    if tables.file_names:
        rows = [f"{k} {quote(v)}" for k, v in tables.file_names.items()]
        blocks.append("\n".join(["FileNames", *rows]))
    if tables.function_names:
        rows = [f"{k} {quote(v)}" for k, v in tables.function_names.items()]
        blocks.append("\n".join(["FunctionNames", *rows]))
    if tables.file_locations:
        rows = []
        for key, loc in tables.file_locations.items():
            fields = [
                f"file_name_id={loc.file_name_id}",
                f"function_name_id={loc.function_name_id}",
                f"line={loc.line}",
            ]
            for name in ("end_line", "column", "end_column"):
                value = getattr(loc, name)
                if value is not None:
                    fields.append(f"{name}={value}")
            rows.append(f"{key} {{{' '.join(fields)}}}")
        blocks.append("\n".join(["FileLocations", *rows]))
    if tables.stack_frames:
        rows = [
            f"{k} {{file_location_id={f.file_location_id} parent_frame_id={f.parent_frame_id}}}"
            for k, f in tables.stack_frames.items()
        ]
        blocks.append("\n".join(["StackFrames", *rows]))
    return blocks


def module_to_text(module: Module) -> str:
    blocks: list[str] = []
    if module.name or module.attributes:
        header = f"HloModule {module.name or 'module'}"
        header += "".join(f", {k}={v}" for k, v in module.attributes.items())
        blocks.append(header)
    blocks.extend(_tables_text(module))
    blocks.extend(computation_to_text(c) for c in module.computations)
    return "\n\n".join(blocks) + "\n"
