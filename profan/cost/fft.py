"""Fast Fourier transforms: ``5 N log2 N`` FLOPs per complex transform of ``N`` points.

``N`` is the product of ``fft_length`` (a 2-D transform of 64x64 is one transform of 4,096
points: ``5 N log2 N`` counts the row and the column passes together).  The number of
transforms is the batch: the complex side's elements over its transformed points.  A real
transform (``RFFT``, ``IRFFT``) does about half the work of the complex one of the same length
(its input or output is half as long): ``2.5 N log2 N``.  These are the usual radix-2 counts
(FFTW's convention); XLA's own cost analysis uses another formula, so module totals over FFTs
differ from ``compiled.cost_analysis()`` by design.
"""

from __future__ import annotations

import math

from profan.cost.context import CostContext, elements, first_array
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.views import int_list_attribute, string_attribute

COMPLEX_TRANSFORM_FLOPS = 5.0  # per point and per log2 of the transform's points
REAL_TRANSFORMS = ("RFFT", "IRFFT")


def fft(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    kind = (string_attribute(instruction, "fft_type") or "FFT").upper()
    points = math.prod(int_list_attribute(instruction, "fft_length"))
    # the side whose last dims are the N points: the real input of RFFT, the real output of
    # IRFFT, either side of a complex transform
    side = instruction.shape if kind == "IRFFT" else model.operand_shape(instruction, 0)
    values = elements(first_array(side))
    transforms = values // points if points > 0 else 0
    per_point = COMPLEX_TRANSFORM_FLOPS * (0.5 if kind in REAL_TRANSFORMS else 1.0)
    log_points = math.log2(points) if points > 1 else 0.0
    cost.flops = per_point * points * log_points * transforms
    cost.derivation.append(
        f"fft ({kind}): {transforms} transform(s) of N={points} points x "
        f"{per_point:g} N log2 N FLOPs"
        + (" (a real transform: half of a complex one)" if kind in REAL_TRANSFORMS else "")
    )
    return cost
