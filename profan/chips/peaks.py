"""The peak FLOP/s a dot or convolution is measured against: the matrix unit's rate for its
operand format and precision config (TPU f32 dots take 1, 3 or 6 bf16 passes; NVIDIA GPUs run
f32 gemms as TF32 unless the precision is HIGHEST; complex dots a quarter of the real rate), and
in words where the figure comes from."""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profan.chips.catalogue import Chip

# Precision config levels as XLA numbers them (PrecisionConfig.Precision).
PRECISION_LEVELS = {"DEFAULT": 0, "HIGH": 1, "HIGHEST": 2}
# TPU: an f32 dot is done as this many bf16 passes on the MXU per precision level (JAX's
# lax.Precision: DEFAULT = 1 pass, HIGH = bf16_3x, HIGHEST = bf16_6x).
TPU_F32_PASSES = {0: 1, 1: 3, 2: 6}
# A complex multiply-add is four real ones; XLA counts it as one FMA (2 FLOPs), so complex dots
# run at a quarter of the real rate in XLA's FLOPs.
COMPLEX_FACTOR = 4


@dataclass(frozen=True, slots=True)
class Peak:
    """The peak FLOP/s one device reaches for an op's operand format and precision."""

    flops_per_s: float  # per device, in XLA's FLOPs (complex FMAs count 2)
    rate: str  # the catalogue rate it is derived from: bf16, fp8, int8, tf32, f32, f64
    divisor: int  # rate / divisor: bf16 passes of a TPU f32 dot, 4 for complex, else 1
    source: str  # where the figure comes from and why this rate, in words

    @property
    def label(self) -> str:
        """Short name of the peak for tables: ``bf16``, ``tf32``, ``bf16/6``."""
        return self.rate if self.divisor == 1 else f"{self.rate}/{self.divisor}"


def _precision_words(precision: str | typing.Sequence[str] | None) -> list[str]:
    """``"{highest,highest}"``, ``"HIGHEST"`` or ``["DEFAULT", "HIGHEST"]`` as upper-case words."""
    if precision is None:
        return []
    values = [precision] if isinstance(precision, str) else list(precision)
    return [word.upper() for value in values for word in re.findall(r"[A-Za-z0-9_]+", str(value))]


def _precision_level(words: list[str]) -> int:
    return max((PRECISION_LEVELS.get(word, 0) for word in words), default=0)


def _algorithm_rate(algorithm: str) -> tuple[str, int] | None:
    """(rate, passes) of an XLA dot algorithm (``PrecisionConfig.Algorithm``)."""
    name = algorithm.strip().upper().removeprefix("ALG_").removeprefix("DOT_")
    if not name or name == "UNSET":
        return None
    passes = 1
    for suffix in ("_X3", "_X6", "_X9"):
        if name.endswith(suffix):
            passes = int(suffix[2:])
            name = name.removesuffix(suffix)
    operand = name.split("_")[0]
    rate = {"BF16": "bf16", "F16": "bf16", "TF32": "tf32", "F32": "f32", "F64": "f64",
            "ANY": "fp8"}.get(operand)  # fmt: skip
    return (rate, passes) if rate else None


def _operand_class(dtype: str | None) -> str:
    """bf16 | fp8 | int8 | f32 | f64 | c64 | c128 | tf32 | other."""
    text = (dtype or "bf16").lower()
    if text in ("bf16", "f16", "fp16"):
        return "bf16"
    if text.startswith(("f8", "fp8", "f4e", "f6e")):
        return "fp8"
    if text in ("s8", "u8", "s4", "u4", "int8", "s2", "u2"):
        return "int8"
    if text in ("f32", "f64", "c64", "c128", "tf32"):
        return text
    return "other"


def _cite(chip: Chip, rate: str) -> str:
    traced = chip.figure_sources.get(f"peak_flops.{rate}", "catalogue")
    citation = chip.sources.get(f"peak_flops.{rate}") or chip.sources.get("peak_flops")
    citation = citation or chip.sources.get("all", "")
    where = "the trace's own peak" if traced == "trace" else f"chips.toml {chip.name}"
    return f"{where} peak_flops.{rate}" + (f" ({citation})" if citation else "")


def peak_for(
    chip: Chip,
    dtype: str | None,
    precision: str | typing.Sequence[str] | None = None,
    algorithm: str | None = None,
) -> Peak:
    """The per-device peak of ``chip`` for a dot with ``dtype`` operands (see ``Chip``)."""
    operand = _operand_class(dtype)
    complex_factor = COMPLEX_FACTOR if operand in ("c64", "c128") else 1
    rate = {"c64": "f32", "c128": "f64"}.get(operand, operand)
    passes = 1
    why: list[str] = []
    words = _precision_words(precision)
    if algorithm is None:  # an algorithm given in the precision text (``dot_bf16_bf16_f32_x3``)
        algorithm = next((w for w in words if w.startswith(("DOT_", "ALG_DOT_"))), None)
    chosen = _algorithm_rate(algorithm) if algorithm else None
    vendor = (chip.vendor or "").upper()
    if chosen is not None:
        rate, passes = chosen
        why.append(f"dot algorithm {algorithm}")
    elif rate == "f32":
        level = _precision_level(words)
        level_name = {0: "DEFAULT", 1: "HIGH", 2: "HIGHEST"}[level]
        if chip.kind == "TPU":
            rate, passes = "bf16", TPU_F32_PASSES[level]
            why.append(f"f32 at {level_name} precision: {passes} bf16 pass(es) on the MXU")
        elif chip.kind == "GPU" and level <= 1 and vendor == "NVIDIA" and "tf32" in chip.peak_flops:
            rate = "tf32"
            why.append(f"f32 at {level_name} precision runs as TF32 on tensor cores (XLA's rule)")
        elif chip.kind == "GPU" and level <= 1 and vendor != "NVIDIA":
            why.append("f32: XLA allows TF32 only on CUDA; ROCm gemms run at the f32 rate")
    if chip.kind == "TPU" and rate in ("f32", "tf32"):
        extra = 6 if rate == "f32" else 3
        why.append(f"{rate} on TPU: {extra} bf16 passes per pass")
        rate, passes = "bf16", passes * extra
    figure = chip.peak_flops.get(rate)
    if figure is None:
        fallback = _fallback_rate(chip, rate)
        why.append(_fallback_reason(chip, rate, fallback))
        if rate == "f64" and chip.kind == "TPU":
            passes *= 6
        rate, figure = fallback, chip.peak_flops[fallback]
    if complex_factor > 1:
        why.append("complex: one complex FMA is 4 real ones")
    divisor = passes * complex_factor
    source = _cite(chip, rate) + (f" / {divisor}" if divisor > 1 else "")
    if chip.devices_per_chip > 1:
        source += f" / {chip.devices_per_chip} devices per chip"
    if why:
        source += "; " + "; ".join(why)
    return Peak(figure / divisor / chip.devices_per_chip, rate, divisor, source)


def _fallback_rate(chip: Chip, rate: str) -> str:
    """The rate used when the catalogue has none for ``rate``: never slower than the real one,
    so the ideal time stays a lower bound."""
    if rate in ("fp8", "int8", "tf32") and "bf16" in chip.peak_flops:
        if rate == "tf32" and "f32" in chip.peak_flops:
            return "f32"
        return "bf16"
    if rate == "f64":
        if chip.kind == "TPU":
            return "bf16"
        if "f32" in chip.peak_flops:
            return "f32"
    return max(chip.peak_flops, key=lambda key: chip.peak_flops[key])


def _fallback_reason(chip: Chip, rate: str, fallback: str) -> str:
    if rate == "fp8" and fallback == "bf16":
        return f"{chip.name} has no fp8 rate: fp8 operands are converted and run at the bf16 rate"
    if rate == "int8" and fallback == "bf16":
        return f"{chip.name} has no int8 rate: the bf16 rate is used"
    if rate == "f64" and chip.kind == "TPU":
        return "TPU has no f64 matrix unit (XLA emulates f64): the f32 HIGHEST rate bounds it"
    if rate == "f64":
        return f"{chip.name} has no f64 rate: the f32 rate bounds it"
    return (
        f"{chip.name} has no {rate} rate: its fastest rate ({fallback}) is used, an upper "
        "bound on speed, so the ideal time stays a lower bound"
    )
