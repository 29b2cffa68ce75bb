"""Per-instruction cost: FLOPs, transcendentals, HBM bytes and interconnect bytes of one HLO op.

``CostModel(module).estimate(instruction) -> OpCost`` (``estimate(instruction, module=None)`` for
one call).  The counting rules follow XLA's ``HloCostAnalysis`` (so module totals agree with
``compiled.cost_analysis()``), with the TPU refinements the TPU compiler's own per-op figures
show (docs/tpu_golden.md): arrays outside HBM (``S(n)``, n != 0) cost no HBM bytes, an array
moves its elements (not its tiles' padding), and what a fusion only hands through (in-place
pass-throughs, a carried async collective: ``inflight``) costs it nothing.

Without a module (a single pasted line) operand shapes come from the text when it printed them;
a fusion's FLOPs are then ``None`` (its body is unknown) — never a guess.

Async pairs (``*-start``/``*-done``, ``async-start``/``async-done``, ``copy-start``/``copy-done``):
bytes and FLOPs sit where XLA's cost analysis puts them — on the start for collectives — except
host copies, where the TPU compiler charges the moved array to both halves (profan agrees, so
per-op figures match a trace, and ``module_totals`` sums both halves as the compiler does).
Both halves carry ``async_role`` and, for collectives, the ``CollectiveInfo``:
``profan.roofline`` times the pair on the done, whose measured duration is the wait for the
transfer.

Modules: ``model`` (what is handed out), ``context`` (what a rule may ask), ``estimate`` (the
``CostModel`` and its opcode table), one module per kind of op (``elementwise``, ``matmul``,
``reduce``, ``movement``, ``collectives``, ``control_flow``, ``fusion``, ``custom_calls``,
``fft``), and the arithmetic they share (``bytes``, ``flops``).
"""

from profan.cost.collectives import axis_decomposition, collective_info
from profan.cost.context import CostContext
from profan.cost.estimate import CostModel, estimate, module_totals
from profan.cost.model import CollectiveInfo, ModuleTotals, OpCost

__all__ = [
    "CollectiveInfo",
    "CostContext",
    "CostModel",
    "ModuleTotals",
    "OpCost",
    "axis_decomposition",
    "collective_info",
    "estimate",
    "module_totals",
]
