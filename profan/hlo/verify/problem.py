"""What the verifier finds: a ``Problem`` (where and why), and dimensions as it prints them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a module is invalid: where (computation, instruction, the operand or attribute
    name to point at) and what was expected."""

    computation: str
    instruction: str | None
    reason: str
    at: str | None = None

    def __str__(self) -> str:
        where = f"%{self.computation}"
        if self.instruction is not None:
            where += f", %{self.instruction}"
        return f"{where}: {self.reason}"


def dims_text(dims: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in dims) + "]"
