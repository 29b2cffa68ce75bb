"""Elementwise math and random numbers: one FLOP (or transcendental) per output element."""

from __future__ import annotations

from profan.cost.context import CostContext, elements
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.opcodes import TRANSCENDENTAL_OPCODES


def elementwise(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    opcode = instruction.opcode
    count = float(elements(instruction.shape))
    if opcode in TRANSCENDENTAL_OPCODES:
        cost.transcendentals = count
        cost.derivation.append(f"{opcode}: 1 transcendental per output element ({count:.0f})")
    else:
        cost.flops = count
        cost.derivation.append(f"{opcode}: 1 FLOP per output element ({count:.0f})")
    return cost


def random_numbers(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    cost.transcendentals = float(sum(leaf.num_elements for leaf in instruction.shape.leaves()))
    cost.derivation.append(
        f"{instruction.opcode}: one transcendental per generated element (XLA's convention)"
    )
    return cost
