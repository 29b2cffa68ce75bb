"""Rebuild ``descriptors.binpb`` and ``descriptors.sha256`` from the ``.proto`` sources.

Run from anywhere, after editing ``profan/trace/*.proto``::

    python -m profan.trace.build_schema

Needs grpcio-tools (its bundled ``protoc``), a dev-only dependency (``.[dev]``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from profan.trace.schema import DESCRIPTORS, HASHES, HERE, PROTO_FILES, source_hashes


def compile_descriptors() -> bytes:
    """The serialized ``FileDescriptorSet`` of the sources, compiled by grpcio-tools' protoc."""
    try:
        from grpc_tools import protoc
    except ImportError:
        raise SystemExit(
            "rebuilding the schema needs grpcio-tools (pip install grpcio-tools, or .[dev])"
        ) from None
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "descriptors.binpb"
        # protoc is run on names relative to this folder, so the set carries no machine path.
        code = protoc.main(
            ["protoc", f"--proto_path={HERE}", f"--descriptor_set_out={out}", *PROTO_FILES]
        )
        if code != 0:
            raise SystemExit(f"protoc failed with exit code {code} (its message is above)")
        return out.read_bytes()


def rebuild() -> None:
    """Write ``descriptors.binpb`` and ``descriptors.sha256`` from the ``.proto`` sources."""
    DESCRIPTORS.write_bytes(compile_descriptors())
    HASHES.write_text(json.dumps(source_hashes(), indent=1, sort_keys=True) + "\n")


def main() -> int:
    rebuild()
    print(f"wrote {DESCRIPTORS.name} and {HASHES.name} in {HERE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
