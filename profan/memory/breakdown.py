"""MODEL.md §6's budget (parameters, optimizer state, activations) recovered from a program.

The buffer assignment knows which entry parameters are donated (aliased to an output) and JAX
records each entry parameter's argument path in its metadata (``params['w1']``,
``opt_state[0].mu['w1']``, ``tokens``).  Parameters and optimizer state are told apart by those
paths; without paths, donated parameters are all counted as parameters (the state cannot be told
apart), and ``how`` says so.
"""

from __future__ import annotations

import re

from profan.memory.model import (
    ALIASED,
    CONSTANT,
    OUTPUT,
    PARAMETER,
    TEMPORARY,
    THREAD_LOCAL,
    Breakdown,
    ProgramMemory,
)

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Path components that name optimizer state in optax / flax / hand-written train steps.
OPTIMIZER_WORDS = frozenset(
    {"opt_state", "optimizer", "optimizer_state", "opt", "mu", "nu", "momentum", "trace", "ema"}
)
PARAMETER_WORDS = frozenset({"params", "param", "parameters", "weights", "variables"})


def _words(path: str | None) -> set[str]:
    return {w.lower() for w in _WORD.findall(path or "")}


def parameter_role(op_path: str | None) -> str | None:
    """ "optimizer_state", "parameters" or None (unrecognised) from an argument path."""
    words = _words(op_path)
    if words & OPTIMIZER_WORDS:
        return "optimizer_state"
    if words & PARAMETER_WORDS:
        return "parameters"
    return None


def breakdown(memory: ProgramMemory) -> Breakdown:
    """Split ``memory.peak_bytes`` into the book's terms; the parts sum to the peak."""
    parameters = optimizer = inputs = outputs = temporaries = other = 0
    named = 0
    for buffer in memory.live_at_peak:
        size = buffer.size_bytes
        if buffer.kind in (PARAMETER, ALIASED):
            role = parameter_role(buffer.op_path)
            named += role is not None
            if role == "optimizer_state":
                optimizer += size
            elif role == "parameters" or (role is None and buffer.kind == ALIASED):
                parameters += size
            else:
                inputs += size
        elif buffer.kind == OUTPUT:
            outputs += size
        elif buffer.kind == TEMPORARY:
            temporaries += size
        elif buffer.kind in (CONSTANT, THREAD_LOCAL):
            other += size
    if named:
        how = "parameters and optimizer state told apart by JAX's argument paths"
    else:
        how = (
            "no argument paths: donated (aliased) parameters counted as parameters, the others "
            "as inputs; optimizer state cannot be told apart"
        )
    return Breakdown(
        parameters_bytes=parameters,
        optimizer_state_bytes=optimizer,
        inputs_bytes=inputs,
        outputs_bytes=outputs,
        temporaries_at_peak_bytes=temporaries,
        other_bytes=other,
        how=how,
    )
