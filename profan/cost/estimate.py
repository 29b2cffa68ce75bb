"""``CostModel``: the cost of any instruction of one module, dispatched per opcode.

Build one ``CostModel(module)`` per module and ask it ``estimate(instruction)`` for each op: the
per-module lookups (users, called computations' costs) are kept between calls.  The counting
rules follow XLA's ``HloCostAnalysis`` (so module totals agree with ``compiled.cost_analysis()``),
with the TPU refinements the TPU compiler's own per-op figures show (docs/tpu_golden.md): arrays
outside HBM (``S(n)``, n != 0) cost no HBM bytes, an array moves its elements (not its tiles'
padding), and what a fusion only hands through costs it nothing (``inflight``).  Each opcode's
rule lives in the module named after what it costs (elementwise, matmul, reduce, movement,
collectives, control_flow, fusion, custom_calls, fft).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from profan.cost import bytes as sizes
from profan.cost import (
    collectives,
    control_flow,
    custom_calls,
    elementwise,
    fft,
    fusion,
    matmul,
    movement,
    reduce,
)
from profan.cost.context import CostContext, first_array, size
from profan.cost.kernels.model import weaker_source
from profan.cost.model import ModuleTotals, OpCost
from profan.hlo.model import Computation, Instruction, Module
from profan.hlo.opcodes import ELEMENTWISE_OPCODES, FREE_OPCODES
from profan.hlo.shapes import is_unknown

Rule = Callable[[Instruction, CostContext, OpCost], OpCost]

RULES: dict[str, Rule] = {
    **dict.fromkeys(ELEMENTWISE_OPCODES, elementwise.elementwise),
    "rng": elementwise.random_numbers,
    "rng-bit-generator": elementwise.random_numbers,
    "dot": matmul.dot,
    "convolution": matmul.convolution,
    "fft": fft.fft,
    "reduce": reduce.reduction,
    "reduce-window": reduce.reduction,
    "map": reduce.reduction,
    "select-and-scatter": reduce.select_and_scatter,
    "sort": reduce.sort,
    "tuple": movement.tuple_,
    "slice": movement.slice_,
    "dynamic-slice": movement.dynamic_slice,
    "dynamic-update-slice": movement.dynamic_update_slice,
    "gather": movement.gather,
    "scatter": movement.scatter,
    "transpose": movement.transpose,
    "copy-start": movement.async_copy,
    "copy-done": movement.async_copy,
    "fusion": fusion.fusion,
    "custom-call": custom_calls.custom_call,
    "while": control_flow.control_flow,
    "call": control_flow.control_flow,
    "conditional": control_flow.control_flow,
    "async-start": control_flow.async_wrapper,
    "async-done": control_flow.async_wrapper,
    **dict.fromkeys(collectives.ASYNC_KIND_OPCODES, collectives.collective),
}
# Exceptions a rule raises when shapes or attributes do not fit the op (a shape the text left
# out, vectorised cuDNN dim labels, ...): the op is flagged as not costable instead.
_MISFIT = (IndexError, KeyError, ValueError, ZeroDivisionError)


def _unknown_shapes(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    """The text left a shape out and it could not be inferred: FLOPs unknown, bytes only those of
    the shapes that are known (a lower bound) — never a silent 0."""
    known = [s for s in [*model.operand_shapes(instruction), instruction.shape] if s is not None]
    cost.flops = cost.transcendentals = None
    cost.unknown = True
    cost.hbm_bytes_read = float(sum(size(s) for s in known[:-1] if not is_unknown(s)))
    cost.hbm_bytes_written = 0.0 if is_unknown(instruction.shape) else float(size(known[-1]))
    cost.bytes_source = "lower-bound"
    cost.derivation.append(
        f"{instruction.opcode}: a shape the text left out could not be inferred; FLOPs unknown, "
        "bytes count only the known shapes (a lower bound)"
    )
    return cost


class CostModel(CostContext):
    """The cost model of one module (``None``: a single pasted line, only its text is known)."""

    def __init__(self, module: Module | None = None) -> None:
        super().__init__(module)
        # (counted memory space, computation name) -> its cost
        self._computation_costs: dict[tuple[int, str], OpCost] = {}
        self._module_spaces: set[int] | None = None  # the memory spaces its values live in

    def _spaces(self, instruction: Instruction) -> set[int]:
        """The memory spaces other than HBM that ``instruction``'s operands and results live in
        (none at all in most modules: that is found once, by one pass over its values)."""
        if self.module is not None:
            if self._module_spaces is None:
                values = [i.shape for i in self.module.instructions()]
                self._module_spaces = sizes.spaces_of(values) - {sizes.HBM_MEMORY_SPACE}
            if not self._module_spaces:
                return set()
        shapes = [*self.operand_shapes(instruction), instruction.shape]
        return sizes.spaces_of(shapes) - {sizes.HBM_MEMORY_SPACE}

    def estimate(self, instruction: Instruction) -> OpCost:
        """FLOPs, transcendentals, HBM and interconnect bytes of one execution, each with its
        source (``flops_source``, ``bytes_source``), and the bytes it moves in every other
        memory space its operands and results live in (``OpCost.other_space_bytes``: the same
        rules, counting that space's arrays)."""
        cost = self._estimate_checked(instruction)
        if sizes.counted_space() != sizes.HBM_MEMORY_SPACE:
            return cost  # one space's pass of an enclosing op (see below)
        for space in sorted(self._spaces(instruction)):
            with sizes.counting_space(space):
                moved = self._estimate_checked(instruction).roofline_bytes
            if moved:  # a space it only hands through (sync flags passing a fusion) moves none
                cost.other_space_bytes[sizes.space_label(space)] = moved
        return cost

    def _estimate_checked(self, instruction: Instruction) -> OpCost:
        try:
            cost = self._estimate(instruction)
        except _MISFIT as error:
            out = first_array(instruction.shape)
            cost = OpCost(None, None, 0.0, 0.0, dtype=out.dtype if out is not None else None)
            cost.unknown = True
            cost.bytes_source = "unknown"
            cost.derivation.append(
                f"{instruction.opcode}: cannot cost ({type(error).__name__}: {error}); "
                "shapes or attributes do not fit the op"
            )
        if cost.flops is None:
            cost.flops_source = "unknown"
        if instruction.operands_elided:
            cost.hbm_bytes_read_is_lower_bound = True
            cost.bytes_source = weaker_source(cost.bytes_source, "lower-bound")
            hidden = instruction.elided_operand_count
            cost.derivation.append(
                "operands not shown in the text"
                + (f" ({hidden} left out)" if hidden else "")
                + ": bytes read count only the operands shown (a lower bound)"
            )
        return cost

    def _estimate(self, instruction: Instruction) -> OpCost:
        out = first_array(instruction.shape)
        cost = OpCost(0.0, 0.0, 0.0, 0.0, dtype=out.dtype if out is not None else None)
        if instruction.opcode in FREE_OPCODES:
            return movement.free(instruction, self, cost)
        if is_unknown(instruction.shape) or any(map(is_unknown, self.operand_shapes(instruction))):
            return _unknown_shapes(instruction, self, cost)
        cost.hbm_bytes_read, cost.hbm_bytes_written = movement.default_bytes(instruction, self)
        rule = RULES.get(instruction.opcode, movement.data_movement)
        return rule(instruction, self, cost)

    def computation_cost(self, computation: Computation) -> OpCost:
        key = (sizes.counted_space(), computation.name)
        known = self._computation_costs.get(key)
        if known is None:
            known = OpCost(0.0, 0.0, 0.0, 0.0)
            for instruction in computation.instructions:
                known.add(self.estimate(instruction))
            self._computation_costs[key] = known
        return known.copy()

    def totals(self, computations: Iterable[Computation] | None = None) -> ModuleTotals:
        """Totals over the entry computation (or ``computations``), the way XLA's cost analysis
        sums a module: control flow includes its called computations once, fusions their bodies'
        FLOPs.  Unknown FLOPs (custom calls) count 0 and are listed."""
        if self.module is None and computations is None:
            raise ValueError("totals need a module")
        totals = ModuleTotals(0.0, 0.0, 0.0)
        for computation in computations or [self.module.entry]:  # type: ignore[union-attr]
            for instruction in computation.instructions:
                cost = self.estimate(instruction)
                if cost.flops is None or cost.unknown:
                    totals.unknown_ops.append(instruction.name)
                totals.flops += cost.flops or 0.0
                totals.transcendentals += cost.transcendentals or 0.0
                totals.bytes_accessed += cost.hbm_bytes
        return totals


def estimate(instruction: Instruction, module: Module | None = None) -> OpCost:
    """The cost of one execution of ``instruction`` (builds a ``CostModel``: for many ops of
    one module, build it once and call its ``estimate``)."""
    return CostModel(module).estimate(instruction)


def module_totals(
    module: Module, computations: Iterable[Computation] | None = None
) -> ModuleTotals:
    """``CostModel(module).totals(computations)``."""
    return CostModel(module).totals(computations)
