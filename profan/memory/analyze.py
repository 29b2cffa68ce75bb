"""Entry points: the memory of every program in a trace, a loaded profile, or an HLO file."""

from __future__ import annotations

from pathlib import Path

from profan.chips import Chip, chip_for_device, get_chip
from profan.errors import ConfigError, TraceError
from profan.hlo.model import Module
from profan.memory.assignment import program_memory
from profan.memory.breakdown import breakdown
from profan.memory.donation import undonated_inputs
from profan.memory.model import MemoryReport, ProgramMemory
from profan.memory.source import EmbeddedProgram, decode, decode_proto, from_profile, from_trace
from profan.trace.profile import DeviceInfo, Profile


def hbm_per_device(chip: Chip) -> float:
    """The chip's memory as one device (one trace plane, one JAX device) sees it."""
    return chip.device_hbm_capacity_bytes


def _finish(report: MemoryReport, chip: Chip | None, module: str | None) -> MemoryReport:
    if module is not None:
        wanted = [p for p in report.programs if module in (p.module, p.module.split("(")[0])]
        if not wanted:
            known = ", ".join(sorted({p.module for p in report.programs})) or "none"
            raise ConfigError(f"no program named {module!r} (programs: {known})")
        report.programs = wanted
    if chip is not None:
        report.chip = chip.name
        report.hbm_bytes = hbm_per_device(chip)
        report.chip_approximate = chip.approximate
    for program in report.programs:
        if program.memory_space == "device" and report.hbm_bytes is not None:
            program.hbm_bytes = report.hbm_bytes
            program.chip = report.chip
        if program.breakdown is None and program.source == "buffer-assignment":
            program.breakdown = breakdown(program)
    report.programs.sort(key=lambda p: (p.memory_space != "device", -p.peak_bytes, p.module))
    return report


def _programs(
    embedded: list[EmbeddedProgram], use_cache: bool, modules: dict[str, Module] | None = None
) -> tuple[list[ProgramMemory], list[str]]:
    programs: list[ProgramMemory] = []
    notes: list[str] = []
    without = []
    for item in embedded:
        known = (modules or {}).get(item.key) or (modules or {}).get(item.name)
        if known is not None:  # already converted by the loader: only the proto is decoded
            proto, module = decode_proto(item), known
        else:
            proto, module = decode(item, use_cache=use_cache)
        found = program_memory(proto, module, item.key)
        for program in found:
            program.undonated = undonated_inputs(program, module)
        if not found:
            without.append(item.key)
        programs.extend(found)
    if without:
        notes.append(
            f"{len(without)} program(s) carry no buffer assignment: {', '.join(without[:10])}"
            + (" …" if len(without) > 10 else "")
        )
    return programs, notes


def _chip(device: DeviceInfo | None, chip_name: str | None) -> Chip | None:
    if chip_name:
        return (
            get_chip(chip_name) if device is None else chip_for_device(device, override=chip_name)
        )
    if device is None:
        return None
    try:
        return chip_for_device(device)
    except ConfigError:
        return None


def analyze_trace(
    path: str | Path,
    *,
    run: str | None = None,
    chip: str | None = None,
    module: str | None = None,
    use_cache: bool = True,
) -> MemoryReport:
    """The memory of every program a trace embeds (``module``: only that one)."""
    found = from_trace(path, run)
    programs, notes = _programs(found.programs, use_cache)
    report = MemoryReport(path=str(path), programs=programs, notes=notes)
    selected = _chip(found.device, chip)
    if selected is None:
        report.notes.append("chip unknown: pass --chip NAME to compare the peak with its memory")
    return _finish(report, selected, module)


def analyze_profile(
    profile: Profile, chip: Chip | None = None, *, use_cache: bool = True
) -> MemoryReport:
    """The memory of the programs that ran in a loaded profile (needs ``Profile.hlo_protos``;
    falls back to reading the trace's metadata plane again when the loader did not keep them)."""
    embedded = from_profile(profile)
    # Modules the loader took from --hlo dumps are keyed by name, the others name(id).
    ran = set(profile.modules)
    covered = {p.key for p in embedded} | {p.name for p in embedded}
    unread: list[str] = []
    if ran - covered:
        # The loader kept no bytes for these: read the trace's metadata plane for them.
        try:
            found = from_trace(profile.path, profile.run).programs
        except TraceError as error:  # e.g. a trace.json: no compiled programs in it
            found = []
            unread.append(f"no buffer assignment read: {error}")
        embedded += [p for p in found if (p.key in ran or p.name in ran) and p.key not in covered]
    programs, notes = _programs(embedded, use_cache, profile.modules)
    report = MemoryReport(path=profile.path, programs=programs, notes=unread + notes)
    return _finish(report, chip, None)


def analyze_hlo_file(
    path: str | Path, *, chip: str | None = None, module: str | None = None
) -> MemoryReport:
    """The static estimate for every module of an HLO text file (see profan.memory.estimate)."""
    from profan.hlo import parse_file
    from profan.memory.estimate import estimate

    parsed = parse_file(Path(path))
    modules = parsed if isinstance(parsed, list) else [parsed]
    report = MemoryReport(path=str(path), programs=[estimate(m) for m in modules])
    return _finish(report, get_chip(chip) if chip else None, module)
