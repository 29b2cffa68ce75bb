"""The HLO of a trace-viewer JSON host, from the ``.xplane.pb`` of its run beside it.

The JSON export keeps op names and their module's name but no HLO and no device stats
(``profan.trace.jsontrace``); the profiler writes both files of a run at once, and the
``.xplane.pb`` embeds every program's ``HloProto`` (its ``/host:metadata`` plane) and each
device's stats (its ``/device:*`` planes).  Only those planes' metadata are read, never their
events: the JSON's events are the ones joined (by module name, as the JSON has no program ids).

Not for a GPU host: its JSON has one event per kernel (a cuDNN call launches several; a CUDA
graph's kernels all name their buffer, ``command_buffer_N``), which only the ``.xplane.pb``
reader groups into op executions; joined as they are, each kernel would count its op's FLOPs
again (the H100 transformer without graphs: MFU 39.5% from the JSON, 22.5% from the xplane).
Its device stats are taken, its HLO is not, and the report says to read the ``.xplane.pb``.
"""

from __future__ import annotations

import re
from pathlib import Path

from profan.trace.planes import HostTrace, plane_stats
from profan.trace.storage import RemotePath
from profan.trace.xplane import embedded_programs, open_planes

_DEVICE_PLANE = re.compile(r"^/device:(?:TPU|GPU):(\d+)$")


def add_hlo_beside(trace: HostTrace, xplane: Path | RemotePath) -> None:
    """Fill ``trace`` (read from a JSON file) with the programs and device stats of ``xplane``,
    and say so in its notes."""
    programs = 0
    with open_planes(str(xplane)) as planes:
        for plane in planes:
            if plane.name == "/host:metadata" and trace.kind != "GPU":
                for module_name, program_id, proto in embedded_programs(plane):
                    trace.hlo_protos[program_id] = (module_name, proto)
                    trace.module_names[program_id] = module_name
                    programs += 1
                continue
            match = _DEVICE_PLANE.match(plane.name)
            if match and int(match.group(1)) in trace.devices:
                trace.devices[int(match.group(1))] = plane_stats(plane)
    if trace.kind == "GPU":
        trace.notes.append(
            f"device stats from {xplane.name} beside the JSON; not its HLO: the JSON has one "
            "event per GPU kernel, not per op execution (report the .xplane.pb itself)"
        )
        return
    trace.notes.append(
        f"HLO ({programs} programs, joined by module name) and device stats from {xplane.name} "
        "beside the JSON"
    )
