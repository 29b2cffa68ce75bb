"""What a ``cost-unknown`` finding asks of the reader, shaped to the op's kind: a custom call
gets the ``--kernels`` entry that would cost it; any other op, what is missing (never a kernel
model for an op that launches no kernel of its own)."""

from __future__ import annotations

from profan.cost.kernels import EXAMPLE_ENTRY, MODELS


def kernel_example(target: str) -> str:
    """The registry's example entry on one line, for ``target``."""
    lines = [line.split("#")[0].strip() for line in EXAMPLE_ENTRY.splitlines()]
    text = " ".join(line for line in lines if line).replace("my_flash_attention_fwd", target)
    return f"{text} (models: {', '.join(MODELS)})"


def cost_unknown_advice(opcode: str, joined: bool, target: str | None) -> str:
    """``joined``: the op has its HLO instruction; ``target``: its custom_call_target."""
    if not joined:
        return (
            "the op was joined to no HLO instruction, so nothing could be costed: pass the run's "
            "HLO dump (--hlo DIR) or the .xplane.pb that embeds it"
        )
    if opcode == "custom-call" and target:
        return (
            "add a cost model in a TOML file given with --kernels FILE (schema: "
            f"profan/data/kernels.toml), e.g. {kernel_example(target)}"
        )
    if opcode == "fusion":
        return (
            "an instruction inside the fused computation that profan cannot cost: report it "
            "(with the fusion's HLO: profan hlo FILE) so its cost can be modelled"
        )
    return (
        f"an opcode profan does not cost ({opcode}): report it (with its HLO line) so its cost "
        "can be modelled"
    )
