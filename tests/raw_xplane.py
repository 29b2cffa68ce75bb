"""The raw side of the tests that check profan against the trace itself: the XSpace read with
protobuf alone (``fixtures/inspect_xplane.py``, which declares the schema itself), never
through profan's readers."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from tests.conftest import FIXTURES_DIR

GPU_PLANE = re.compile(r"^/device:GPU:(\d+)$")


@cache
def inspect_xplane() -> ModuleType:
    """``fixtures/inspect_xplane.py``, loaded once."""
    spec = importlib.util.spec_from_file_location(
        "profan_fixture_inspect_xplane", FIXTURES_DIR / "inspect_xplane.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class RawKernel:
    """One event on a GPU plane that carries ``hlo_op``."""

    device: int  # N of /device:GPU:N
    name: str  # the kernel (the event's metadata name)
    start_ps: int  # on the trace's absolute clock
    duration_ps: int
    stats: dict[str | None, Any]  # by stat name, ref_value stats resolved to their string


@dataclass(frozen=True)
class RawKernels:
    """The kernels of one trace, read raw."""

    planes: int  # /device:GPU:N planes in the file
    kernels: tuple[RawKernel, ...]


@cache
def raw_kernels(path: str) -> RawKernels:
    """Every GPU event of the xplane file at ``path`` that carries ``hlo_op``."""
    ix = inspect_xplane()
    planes = 0
    kernels: list[RawKernel] = []
    for plane in ix.read_xspace(path).planes:
        device = GPU_PLANE.match(plane.name)
        if not device:
            continue
        planes += 1
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                stats = {}
                for stat in event.stats:
                    value = ix.stat_value(stat)
                    if stat.WhichOneof("value") == "ref_value":
                        value = names.get(value)
                    stats[names.get(stat.metadata_id)] = value
                if stats.get("hlo_op") is None:
                    continue
                kernels.append(
                    RawKernel(
                        device=int(device.group(1)),
                        name=plane.event_metadata[event.metadata_id].name,
                        start_ps=line.timestamp_ns * 1000 + event.offset_ps,
                        duration_ps=event.duration_ps,
                        stats=stats,
                    )
                )
    return RawKernels(planes=planes, kernels=tuple(kernels))
