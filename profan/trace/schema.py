"""profan's protobuf schema: a committed ``FileDescriptorSet`` built from the ``.proto`` files.

``xplane.proto`` (XSpace, what the profiler writes) and ``hlo.proto`` (the HloProto embedded in
traces) live beside this module.  ``protoc`` (from grpcio-tools, a dev-only dependency) compiles
them into ``descriptors.binpb``, which is committed; at run time the descriptors are added to a
private ``DescriptorPool`` and the protobuf runtime (upb) builds the message classes, so decoding
runs in the runtime's C code without generated ``_pb2`` modules (those are tied to the protobuf
release that generated them).  ``descriptors.sha256`` records the SHA-256 of every ``.proto``
source the set was built from; a test compares it with the files, so the two cannot drift.

After editing a ``.proto`` file, rebuild (one line, from the repository root)::

    python -m profan.trace.build_schema
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

HERE = Path(__file__).resolve().parent
PROTO_FILES = ("xplane.proto", "hlo.proto")
DESCRIPTORS = HERE / "descriptors.binpb"
HASHES = HERE / "descriptors.sha256"


def source_hashes() -> dict[str, str]:
    """SHA-256 of each ``.proto`` source as it is now."""
    return {name: hashlib.sha256((HERE / name).read_bytes()).hexdigest() for name in PROTO_FILES}


def recorded_hashes() -> dict[str, str]:
    """SHA-256 of each ``.proto`` source that ``descriptors.binpb`` was built from."""
    return dict(json.loads(HASHES.read_text(encoding="utf-8")))


@cache
def _descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    return descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    # A private pool: never collides with a _pb2 of the same package another library loaded.
    pool = descriptor_pool.DescriptorPool()
    for file_proto in _descriptor_set().file:
        pool.Add(file_proto)
    return pool


@cache
def load_schema(file_name: str) -> dict[str, type[Message]]:
    """Message classes (by full name) of one schema file, e.g. ``load_schema("xplane.proto")``."""
    if file_name not in PROTO_FILES:
        raise KeyError(f"no schema {file_name!r} (known: {', '.join(PROTO_FILES)})")
    file_descriptor = _pool().FindFileByName(file_name)
    classes: dict[str, type[Message]] = {}

    def collect(descriptors: Iterable[Any]) -> None:
        for descriptor in descriptors:
            classes[descriptor.full_name] = message_factory.GetMessageClass(descriptor)
            collect(descriptor.nested_types)

    collect(file_descriptor.message_types_by_name.values())
    return classes
