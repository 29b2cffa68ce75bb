"""What each HLO instruction is and where in the code it came from.

``categories.py``: ``classify(instruction, module)`` — a category (``CATEGORIES``), a finer kind
and the reason, for instructions and for a profile's op events (``classify_ops``).
``scopes.py``: the op path, JAX named scope, source line, repeated layers and block kinds.
"""

from profan.attribute.categories import (
    CATEGORIES,
    Classification,
    backend_kind,
    classify,
    classify_ops,
)
from profan.attribute.scopes import (
    RepeatedScope,
    block_kind,
    group_by_scope,
    is_backward,
    op_name_of,
    repeated_scopes,
    scope_of,
    scope_prefix,
    source_of,
)

__all__ = [
    "CATEGORIES",
    "Classification",
    "RepeatedScope",
    "backend_kind",
    "block_kind",
    "classify",
    "classify_ops",
    "group_by_scope",
    "is_backward",
    "op_name_of",
    "repeated_scopes",
    "scope_of",
    "scope_prefix",
    "source_of",
]
