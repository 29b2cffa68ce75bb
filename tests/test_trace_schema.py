"""The committed descriptor set (profan/trace/descriptors.binpb) matches the .proto sources."""

from __future__ import annotations

import importlib.util

import pytest

from profan.trace import schema
from profan.trace.schema import load_schema, recorded_hashes, source_hashes

REBUILD = "python -m profan.trace.build_schema"


def test_descriptor_set_was_built_from_the_current_sources() -> None:
    assert recorded_hashes() == source_hashes(), (
        f"a .proto file changed after descriptors.binpb was built: run `{REBUILD}`"
    )


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None,
    reason="grpcio-tools is not installed (a dev-only dependency): cannot recompile the schema",
)
def test_rebuilding_gives_the_committed_bytes() -> None:
    from profan.trace.build_schema import compile_descriptors

    assert compile_descriptors() == schema.DESCRIPTORS.read_bytes(), f"run `{REBUILD}`"


def test_descriptor_set_names_files_without_machine_paths() -> None:
    names = [file.name for file in schema._descriptor_set().file]
    assert names == list(schema.PROTO_FILES)


def test_every_declared_message_gets_a_class() -> None:
    for file in schema._descriptor_set().file:
        classes = load_schema(file.name)
        for message in file.message_type:
            assert f"{file.package}.{message.name}" in classes
    hlo = load_schema("hlo.proto")["xla.HloModuleProto"]
    assert hlo.DESCRIPTOR.fields_by_name["computations"].message_type.name == (
        "HloComputationProto"
    )


def test_unknown_schema_name_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="no schema"):
        load_schema("tensorflow.proto")
