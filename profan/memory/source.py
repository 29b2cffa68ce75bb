"""Where programs come from: the HloProtos a trace embeds, or HLO text for a static estimate.

``from_trace`` reads only what the memory analysis needs from the trace files: the
``/host:metadata`` plane (one serialized ``HloProto`` per program, with its buffer assignment) and
the device planes' stats (which chip it ran on).  ``from_profile`` uses a loaded ``Profile``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import Message

from profan.errors import TraceError
from profan.hlo.model import Module
from profan.hlo.stored import cached_module
from profan.trace.discover import find_run
from profan.trace.hloproto import decode_hlo_proto, module_from_proto_bytes
from profan.trace.profile import DeviceInfo, Profile
from profan.trace.xplane import embedded_programs, open_planes, plane_stats

_MODULE_WITH_ID = re.compile(r"^(.*)\((\d+)\)$")
_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)")


@dataclass(slots=True)
class EmbeddedProgram:
    """One program's serialized HloProto as a trace holds it."""

    key: str  # ``name(program_id)``, as profan.load keys modules
    name: str
    program_id: int
    data: bytes
    where: str  # file it came from, for messages


@dataclass(slots=True)
class TracePrograms:
    programs: list[EmbeddedProgram] = field(default_factory=list)
    device: DeviceInfo | None = None
    path: str = ""


def from_trace(path: str | Path, run: str | None = None) -> TracePrograms:
    """Every program a trace embeds (first host that has it, by program id) and its device."""
    found = find_run(path, run)
    result = TracePrograms(path=str(path))
    seen: set[int] = set()
    device_stats: dict[str, object] = {}
    kind = "CPU"
    count = 0
    for host, file in sorted(found.files.items()):
        if found.formats.get(host) != "xplane":
            continue
        with open_planes(str(file)) as planes:
            for plane in planes:
                device = _DEVICE_PLANE.match(plane.name)
                if device:
                    kind = "TPU" if device.group(1) == "TPU" or kind == "TPU" else "GPU"
                    count += 1
                    if not device_stats:
                        device_stats = plane_stats(plane)
                elif plane.name == "/host:metadata":
                    for name, program_id, data in embedded_programs(plane):
                        if program_id not in seen:
                            seen.add(program_id)
                            key = f"{name}({program_id})"
                            result.programs.append(
                                EmbeddedProgram(key, name, program_id, data, str(file))
                            )
    if not any(f == "xplane" for f in found.formats.values()):
        raise TraceError(
            str(path),
            "no xplane.pb file: the buffer assignment is only in the profiler's XSpace "
            "(trace.json files do not carry the compiled programs)",
        )
    result.device = DeviceInfo.from_stats(kind, device_stats, count or 1)
    result.programs.sort(key=lambda p: p.program_id)
    return result


def decode_proto(program: EmbeddedProgram) -> Message:
    """The decoded HloProto (module and buffer assignment) of one embedded program."""
    return decode_hlo_proto(program.data, where=f"{program.where}: HloProto of {program.key}")


def decode(program: EmbeddedProgram, *, use_cache: bool = True) -> tuple[Message, Module]:
    """The decoded HloProto and profan's model of its module (cached like profan.load's)."""
    where = f"{program.where}: HloProto of {program.key}"
    proto = decode_proto(program)

    def build() -> Module:
        return module_from_proto_bytes(program.data, where=where)

    module = cached_module("hloproto", program.data, build) if use_cache else build()
    return proto, module


def from_profile(profile: Profile) -> list[EmbeddedProgram]:
    """The embedded programs of a loaded profile's modules, when the loader kept their bytes
    (``Profile.hlo_protos``); empty otherwise."""
    kept = profile.hlo_protos
    programs = []
    for key, data in kept.items():
        match = _MODULE_WITH_ID.match(key)
        name, program_id = (match.group(1), int(match.group(2))) if match else (key, -1)
        programs.append(EmbeddedProgram(key, name, program_id, data, profile.path))
    return programs
