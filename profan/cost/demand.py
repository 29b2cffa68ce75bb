"""Which elements of its parameters a fused computation really reads.

XLA's cost analysis charges a fused parameter in full unless a ``slice``/``dynamic-slice`` reads
it directly.  A fusion's kernel, though, computes only the output elements it writes, and so
reads only the operand elements those need: a ``bitcast`` then ``slice`` of a stacked weight
reads one layer, an elementwise chain feeding a ``gather`` reads the gathered elements, the
operand of an in-place ``dynamic-update-slice`` is not read at all.  This module propagates that
demand from the fusion's outputs back to its parameters, element counts only (no index sets):

* elementwise ops, bitcasts, reshapes, copies, transposes pass an element's demand through;
* ``slice``, ``dynamic-slice``, ``gather``, ``broadcast``, ``pad`` need at most as many elements
  of their (first) operand as are demanded of them;
* ``reduce``, ``reduce-window``, ``concatenate`` need their operands in proportion;
* the operand 0 of a ``dynamic-update-slice`` supplies the elements the update does not
  overwrite, none when the update happens in place on a fusion output aliased to a parameter;
* a nested fusion needs of each operand what its own body needs of that parameter (a scanned
  layer's ``dynamic-slice`` of the stacked weights inside the matmul's operand fusion);
* every other op (dots, convolutions, sorts, scatters, custom calls, ...) needs its operands
  whole.

A demanded element is read once, so the bytes are ``demanded / elements x stored bytes``, never
more than the parameter; gathers count one element per gathered output, a lower bound on the
sectors HBM really moves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from profan.cost.context import CostContext, size
from profan.hlo.model import Computation, Instruction
from profan.hlo.opcodes import ELEMENTWISE_OPCODES
from profan.hlo.views import called_computations

_PASS_THROUGH = ELEMENTWISE_OPCODES | {"bitcast", "reshape", "copy", "transpose", "reverse"}
_AT_MOST_DEMANDED = frozenset({"slice", "dynamic-slice", "gather", "broadcast", "pad"})
_PROPORTIONAL = frozenset({"reduce", "reduce-window", "concatenate"})
_ALIASES = frozenset({"bitcast", "reshape", "copy"})


def _elements(instruction: Instruction) -> int:
    """Elements of a value (a tuple's: all its arrays')."""
    shape = instruction.shape
    if shape.is_tuple:
        return sum(leaf.num_elements for leaf in shape.leaves() if leaf.is_array)
    return shape.num_elements


def _operand_names(instruction: Instruction) -> list[str]:
    return [name.lstrip("%") for name in instruction.operand_names]


def _outputs(body: Computation) -> set[str]:
    """Names of the instructions whose values leave the fusion: the root (a root tuple's
    operands), and what those only relabel (bitcasts, reshapes of it)."""
    root = body.root
    pending = _operand_names(root) if root.opcode == "tuple" else [root.name]
    found: set[str] = set()
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.add(name)
        instruction = body.get(name)
        if instruction is not None and instruction.opcode in _ALIASES and instruction.operands:
            pending.append(instruction.operands[0].name.lstrip("%"))
    return found


def _is_parameter(name: str, body: Computation) -> bool:
    found = body.get(name)
    while found is not None and found.opcode in _ALIASES and found.operands:
        found = body.get(found.operands[0].name.lstrip("%"))
    return found is not None and found.opcode == "parameter"


Nested = Callable[[Instruction, int], "float | None"]


def _contribution(
    user: Instruction,
    index: int,
    operand: Instruction,
    wanted: float,
    body: Computation,
    outputs: set[str],
    nested: Nested,
) -> float:
    """Elements of ``operand`` (operand ``index`` of ``user``) that ``wanted`` demanded elements
    of ``user`` need."""
    if wanted <= 0:
        return 0.0
    whole = float(_elements(operand))
    opcode = user.opcode
    if opcode == "fusion":
        inner = nested(user, index)
        if inner is not None:
            produced = float(sum(leaf.num_elements for leaf in user.shape.leaves()))
            share = min(1.0, wanted / produced) if produced else 1.0
            return min(whole, inner * share)
    if user.shape.is_tuple or not user.shape.is_array:
        return whole  # multi-output ops: no per-element reading
    produced = float(_elements(user))
    if opcode in _PASS_THROUGH:
        return min(whole, wanted)
    if opcode in _AT_MOST_DEMANDED and index == 0:
        return min(whole, wanted)
    if opcode == "dynamic-update-slice" and index == 0:
        if user.name in outputs and _is_parameter(operand.name, body):
            return 0.0  # updated in place: the rest of the buffer stays where it is
        update = body.get(user.operands[1].name.lstrip("%")) if len(user.operands) > 1 else None
        kept = wanted - (float(_elements(update)) if update is not None else 0.0)
        return min(whole, max(kept, 0.0))
    if opcode in _PROPORTIONAL and produced > 0:
        return min(whole, whole * wanted / produced)
    return whole


def _nested_demand(model: CostContext) -> Nested:
    """What a nested fusion's body needs of its parameter ``index`` (``None``: body unknown)."""

    known: dict[str, dict[str, float]] = {}

    def demand_of(user: Instruction, index: int) -> float | None:
        names = called_computations(user)
        inner = model.callee(names[0]) if names else None
        if inner is None:
            return None
        parameter = next((p for p in inner.params if p.parameter_number == index), None)
        if parameter is None:
            return None
        if inner.name not in known:
            known[inner.name] = demanded_elements(inner, model)
        return known[inner.name].get(parameter.name, 0.0)

    return demand_of


def demanded_elements(body: Computation, model: CostContext) -> dict[str, float]:
    """Instruction name -> how many of its output elements the fusion's outputs need."""
    nested = _nested_demand(model)
    demand: dict[str, float] = {}
    outputs = _outputs(body)
    users = {instruction.name: model.users(instruction) for instruction in body.instructions}
    waiting = {name: len(found) for name, found in users.items()}
    ready = [i for i in body.instructions if waiting[i.name] == 0]
    while ready:
        instruction = ready.pop()
        if instruction.opcode == "tuple" and instruction.is_root:
            wanted = 0.0  # the root tuple itself is no data; its operands are outputs
        elif instruction.name in outputs:
            wanted = float(_elements(instruction))
        else:
            wanted = min(float(_elements(instruction)), demand.get(instruction.name, 0.0))
        demand[instruction.name] = wanted
        seen: set[str] = set()
        for index, name in enumerate(_operand_names(instruction)):
            operand = body.get(name)
            if operand is None:
                continue
            part = _contribution(instruction, index, operand, wanted, body, outputs, nested)
            if instruction.opcode == "tuple" and instruction.is_root:
                part = 0.0
            demand[name] = demand.get(name, 0.0) + part
            if name not in seen:
                seen.add(name)
                waiting[name] -= 1
                if waiting[name] == 0:
                    ready.append(operand)
    return demand


def parameter_read_bytes(
    body: Computation, model: CostContext, skip: Collection[int] = ()
) -> tuple[float, list[str]]:
    """Bytes the fusion reads of all its parameters (but those numbered in ``skip``) given what
    its outputs need, and a note for each parameter it reads only in part."""
    demand = demanded_elements(body, model)
    total = 0.0
    notes: list[str] = []
    for parameter in body.params:
        if parameter.parameter_number in skip:
            continue
        pieces = (
            [u for u in model.users(parameter) if u.opcode == "get-tuple-element"]
            if parameter.shape.is_tuple
            else [parameter]
        )
        for piece in pieces:
            stored = float(size(piece.shape))
            count = _elements(piece)
            wanted = min(float(count), demand.get(piece.name, 0.0))
            read = stored * wanted / count if count else stored
            total += read
            if read < stored:
                notes.append(f"{piece.name}: {read:.0f} of {stored:.0f} B")
    return total, notes
