"""Custom calls: costed by the kernel registry (``profan.cost.kernels``), which maps the call's
target to a model (library gemms, convolutions, fused attention, Pallas/Triton kernels,
annotations); a target no entry matches gets FLOPs unknown (flagged, never guessed) and its
operands plus results as a lower bound on bytes.
"""

from __future__ import annotations

import re
from typing import Any

from profan.cost.bytes import HBM_MEMORY_SPACE, counted_space
from profan.cost.context import CostContext
from profan.cost.kernels import KernelCall, KernelCost, cost_kernel, find_rule
from profan.cost.kernels.model import io_bytes
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.views import backend_config, custom_call_target, metadata

_KERNEL_NAME = re.compile(r'kernel_name="([^"]+)"')


def kernel_name(instruction: Instruction, config: dict[str, Any]) -> str:
    """The kernel's own name where the call carries one: the Triton config's ``name``, a
    ``kernel_name`` frontend attribute, else the metadata op_name (Pallas puts the kernel's
    name there: ``.../splash_mha_fwd/pallas_call``)."""
    name = config.get("name")
    if isinstance(name, str) and name:
        return name
    found = _KERNEL_NAME.search(instruction.attributes.get("frontend_attributes", ""))
    if found:
        return found.group(1)
    return metadata(instruction).op_name or instruction.name


def kernel_call(instruction: Instruction, model: CostContext) -> KernelCall:
    """What the kernel models may know about ``instruction`` (from its line and operands)."""
    config = backend_config(instruction) or {}
    return KernelCall(
        target=custom_call_target(instruction) or "",
        operands=model.operand_shapes(instruction),
        result=instruction.shape,
        config=config,
        attributes=dict(instruction.attributes),
        name=kernel_name(instruction, config),
    )


def apply(kernel: KernelCost, cost: OpCost) -> OpCost:
    """Copy a kernel model's figures, their sources and its precision onto the op's cost."""
    cost.flops = kernel.flops
    cost.transcendentals = kernel.transcendentals
    cost.hbm_bytes_read, cost.hbm_bytes_written = kernel.bytes_read, kernel.bytes_written
    cost.unknown = kernel.unknown
    if kernel.dtype is not None:
        cost.dtype = kernel.dtype
    cost.flops_source, cost.bytes_source = kernel.flops_source, kernel.bytes_source
    cost.precision, cost.algorithm = kernel.precision, kernel.algorithm
    cost.matrix_math = kernel.matrix_math
    cost.async_role = kernel.async_role or cost.async_role
    cost.derivation.extend(kernel.derivation)
    return cost


def custom_call(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    call = kernel_call(instruction, model)
    kernel = cost_kernel(call)
    if kernel.bytes_source == "cost-estimate" and counted_space() != HBM_MEMORY_SPACE:
        # the kernel's stated bytes are its HBM traffic: another space moves its own arrays,
        # counted as the rule's model counts them (a scratch workspace result is not data)
        rule = find_rule(call.target, None, call.name)
        kernel.bytes_read, kernel.bytes_written = io_bytes(call, rule.params if rule else {})
    return apply(kernel, cost)
