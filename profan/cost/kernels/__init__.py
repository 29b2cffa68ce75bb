"""Cost models of custom-call kernels: library gemms and convolutions, fused attention (cuDNN,
TransformerEngine, Pallas splash/flash), Pallas/Mosaic/Triton kernels, annotations.

Which model a custom-call target gets is data: ``profan/data/kernels.toml`` maps target patterns
to a model name and its parameters; a user file with the same schema (``--kernels FILE``,
default ``$PROFAN_KERNELS``; ``using_kernel_file``) adds entries, which win over the built-in
ones.  The models are pure functions (``KernelCall`` -> ``KernelCost``); every figure says where
it came from (``SOURCES``).
``profan.cost.custom_calls`` builds the ``KernelCall`` from an instruction.
"""

from profan.cost.kernels.attention import (
    AttentionShape,
    attended_pairs,
    attention_flops,
)
from profan.cost.kernels.gemm import matmul_signature
from profan.cost.kernels.model import (
    SOURCE_MEANINGS,
    SOURCES,
    KernelCall,
    KernelCost,
    reconcile,
    weaker_source,
)
from profan.cost.kernels.registry import (
    EXAMPLE_ENTRY,
    MODELS,
    REGISTRY_FILE,
    KernelEntry,
    Rule,
    cost_kernel,
    find_rule,
    read_kernel_file,
    registry,
    using_kernel_file,
)

__all__ = [
    "EXAMPLE_ENTRY",
    "MODELS",
    "REGISTRY_FILE",
    "SOURCES",
    "SOURCE_MEANINGS",
    "AttentionShape",
    "KernelCall",
    "KernelCost",
    "KernelEntry",
    "Rule",
    "attended_pairs",
    "attention_flops",
    "cost_kernel",
    "find_rule",
    "matmul_signature",
    "read_kernel_file",
    "reconcile",
    "registry",
    "using_kernel_file",
    "weaker_source",
]
