"""Fast Fourier transforms."""

from __future__ import annotations

import math

from profan.cost.context import CostContext, elements, first_array
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.views import int_list_attribute


def fft(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    lengths = int_list_attribute(instruction, "fft_length")
    factor = 1
    for length in lengths:
        factor *= max(int(math.log2(length)), 0) if length > 0 else 0
    real = first_array(model.operand_shape(instruction, 0))
    cost.flops = float(2 * 4 * factor * elements(real))
    cost.derivation.append("fft: 8 x n log2 n")
    return cost
