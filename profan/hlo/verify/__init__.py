"""HLO checked the way XLA's verifier checks it, for what profan's cost model relies on.

XLA's parser runs its verifier (``hlo_verifier.cc``, shape inference in ``shape_inference.cc``)
on every module it reads; a module it rejects never runs and has no cost.  profan costs ops by
their shapes, so a module whose shapes contradict each other would be given numbers that mean
nothing (a dot whose contracting sizes differ still gets FLOPs).  ``verify_module`` rejects:

* shapes (``sizes``): dimensions outside int64, arrays whose element or byte count overflows
  int64, a layout whose ``minor_to_major`` is not a permutation of the dimensions, tuples nested
  deeper than ``MAX_TUPLE_DEPTH`` (nothing real comes near; deeper ones exhaust Python's stack
  downstream);
* structure (``structure``): an opcode XLA does not know, an operand count its opcode does not
  allow, an op without a computation its opcode must call (``while`` without ``body=``,
  ``conditional`` without branches, ``fusion`` without ``calls=``, …);
* graphs (``graphs``): an instruction that depends on itself through its operands or control
  predecessors; a computation that calls itself (directly or not), or any call into the entry
  computation;
* ops the cost model costs by shape (``ops``): operand and result dimensions that XLA's
  shape inference would refuse (dot, convolution, elementwise, broadcast, transpose, reshape,
  concatenate, slice, dynamic-slice, dynamic-update-slice, reduce, pad, gather);
* replica groups (``sizes``) naming more than ``MAX_GROUP_DEVICES`` devices: counted from the
  text, never expanded.  (Not bounded by ``replica_count`` x ``num_partitions``: XLA's parser
  accepts groups beyond it, and its verifier compares them only in some collective modes.)

Only dimensions are compared, never element types (XLA allows mixed precision) nor layouts; an
unbounded dynamic dimension matches any size.  The check is pure (``verifier``):
``first_problem`` returns the first ``Problem`` in printed order; ``verify_module`` raises it as
``HloInvalidError`` placed at the instruction's line and column when the text is given.

Each module holds one idea: ``sizes`` (sizes, layouts, tuple depth, replica groups),
``structure`` (opcodes, operand counts, called computations), ``graphs`` (cycles, calls),
``ops`` (shapes of the ops costed by shape), ``problem`` (what is found) and ``verifier`` (the
checks in order); this package only re-exports them.
"""

from profan.hlo.verify.problem import Problem
from profan.hlo.verify.sizes import (
    INT64_MAX,
    MAX_GROUP_DEVICES,
    MAX_TUPLE_DEPTH,
    group_devices,
    shape_problem,
    strip_index_comments,
)
from profan.hlo.verify.structure import structure_problem
from profan.hlo.verify.verifier import first_problem, verify_module

__all__ = [
    "INT64_MAX",
    "MAX_GROUP_DEVICES",
    "MAX_TUPLE_DEPTH",
    "Problem",
    "first_problem",
    "group_devices",
    "shape_problem",
    "strip_index_comments",
    "structure_problem",
    "verify_module",
]
