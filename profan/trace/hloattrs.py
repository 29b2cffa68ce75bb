"""HloProto fields printed as XLA's HLO printer writes them (``profan.trace.hloproto`` builds
instructions with these texts as their attribute values): replica groups (explicit, iota, mesh),
windows, convolution dimension labels, shardings, metadata, literals and every other attribute.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from functools import cache

from google.protobuf.message import Message

from profan.hlo.model import Shape
from profan.hlo.text import quote
from profan.trace.schema import load_schema


@cache
def _classes() -> dict[str, type[Message]]:
    return load_schema("hlo.proto")


def _ints(values: Iterable[int]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def _iota_text(reshape: Sequence[int], transpose: Sequence[int], shape: Sequence[int]) -> str:
    """``[shape]<=[reshape]`` plus ``T(perm)`` when the permutation is not the identity."""
    text = "[" + ",".join(map(str, shape)) + "]<=[" + ",".join(map(str, reshape)) + "]"
    if list(transpose) and list(transpose) != list(range(len(transpose))):
        text += "T(" + ",".join(map(str, transpose)) + ")"
    return text


def _mesh_axes_text(proto: Message) -> str:
    axes = list(proto.mesh.axes)
    text = "mesh[" + ",".join(f"'{axis.name}'={axis.size}" for axis in axes) + "]"
    if proto.mesh.device_ids:
        text += "(" + ",".join(map(str, proto.mesh.device_ids)) + ")"
    refs = []
    for ref in proto.axes:
        name = axes[ref.mesh_axis_index].name if ref.mesh_axis_index < len(axes) else "?"
        item = f"'{name}'"
        if ref.HasField("sub_axis_info"):
            item += f":({ref.sub_axis_info.pre_size}){ref.sub_axis_info.size}"
        refs.append(item)
    return text + " {" + ",".join(refs) + "}"


def _replica_groups(proto: Message) -> str | None:
    if proto.HasField("mesh_axes_replica_groups"):
        return _mesh_axes_text(proto.mesh_axes_replica_groups)
    if proto.HasField("iota_replica_groups"):
        iota = proto.iota_replica_groups
        return _iota_text(
            iota.iota_reshape_dims,
            iota.iota_transpose_perm,
            (iota.num_replica_groups, iota.num_devices_per_group),
        )
    device_list = proto.collective_device_list
    if proto.HasField("collective_device_list") and device_list.HasField("iota_replica_group_list"):
        iota = device_list.iota_replica_group_list
        return _iota_text(
            iota.iota_reshape_dims,
            iota.iota_transpose_perm,
            (iota.num_replica_groups, iota.num_devices_per_group),
        )
    groups = list(device_list.replica_groups) or list(proto.replica_groups)
    return "{" + ",".join(_ints(g.replica_ids) for g in groups) + "}"


def _window(proto: Message) -> str:
    dims = list(proto.dimensions)
    parts: list[str] = []

    def joined(values: list[str]) -> str:
        return "x".join(values)

    if dims:
        parts.append("size=" + joined([str(d.size) for d in dims]))
    if any(d.stride != 1 for d in dims):
        parts.append("stride=" + joined([str(d.stride) for d in dims]))
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + joined([f"{d.padding_low}_{d.padding_high}" for d in dims]))
    if any(d.base_dilation not in (0, 1) for d in dims):
        parts.append("lhs_dilate=" + joined([str(d.base_dilation or 1) for d in dims]))
    if any(d.window_dilation not in (0, 1) for d in dims):
        parts.append("rhs_dilate=" + joined([str(d.window_dilation or 1) for d in dims]))
    if any(d.window_reversal for d in dims):
        parts.append("rhs_reversal=" + joined([str(int(d.window_reversal)) for d in dims]))
    return "{" + " ".join(parts) + "}"


def _dim_labels(proto: Message, rank: int) -> str:
    """Convolution dimension numbers as XLA's ``b01f_01io->b01f`` labels."""

    def labels(batch: int, feature: int, spatial: Sequence[int], letters: str) -> str:
        chars = ["?"] * rank
        if 0 <= batch < rank:
            chars[batch] = letters[0]
        if 0 <= feature < rank:
            chars[feature] = letters[1]
        for index, dim in enumerate(spatial):
            if 0 <= dim < rank:
                chars[dim] = str(index)
        return "".join(chars)

    lhs = labels(
        proto.input_batch_dimension,
        proto.input_feature_dimension,
        proto.input_spatial_dimensions,
        "bf",
    )
    rhs = labels(
        proto.kernel_input_feature_dimension,
        proto.kernel_output_feature_dimension,
        proto.kernel_spatial_dimensions,
        "io",
    )
    out = labels(
        proto.output_batch_dimension,
        proto.output_feature_dimension,
        proto.output_spatial_dimensions,
        "bf",
    )
    return f"{lhs}_{rhs}->{out}"


def _sharding(proto: Message) -> str:
    kind = _enum_names_nested("OpSharding", "Type").get(proto.type, "OTHER")
    if kind == "TUPLE":
        return "{" + ", ".join(_sharding(s) for s in proto.tuple_shardings) + "}"
    if kind == "REPLICATED":
        body = "replicated"
    elif kind == "MANUAL":
        body = "manual"
    elif kind == "UNKNOWN":
        body = "unknown"
    elif kind == "UNREDUCED":
        body = "unreduced"
    elif kind == "MAXIMAL":
        devices = list(proto.tile_assignment_devices)
        body = f"maximal device={devices[0] if devices else 0}"
    else:
        dims = list(proto.tile_assignment_dimensions)
        if proto.iota_reshape_dims:
            assignment = _iota_text(proto.iota_reshape_dims, proto.iota_transpose_perm, dims)
        else:
            assignment = (
                "["
                + ",".join(map(str, dims))
                + "]"
                + ",".join(map(str, proto.tile_assignment_devices))
            )
        body = f"devices={assignment}"
        if proto.replicate_on_last_tile_dim:
            body += " last_tile_dim_replicate"
        elif proto.last_tile_dims:
            names = _enum_names_nested("OpSharding", "Type")
            body += (
                " last_tile_dims={"
                + ", ".join(names.get(t, "?").lower() for t in proto.last_tile_dims)
                + "}"
            )
    if proto.is_shard_group:
        body += f" shard_{'like' if proto.shard_group_type == 1 else 'as'} {proto.shard_group_id}"
    return "{" + body + "}"


@cache
def _enum_names_nested(message: str, enum: str) -> dict[int, str]:
    descriptor = _classes()[f"xla.{message}"].DESCRIPTOR.enum_types_by_name[enum]
    return {value.number: value.name for value in descriptor.values}


# OpMetadata fields in the order XLA prints them, and whether the value is a quoted string.
_METADATA_FIELDS: tuple[tuple[str, bool], ...] = (
    ("op_type", True),
    ("op_name", True),
    ("source_file", True),
    ("source_line", False),
    ("source_end_line", False),
    ("source_column", False),
    ("source_end_column", False),
    ("deduplicated_name", True),
    ("scheduling_name", True),
    ("stack_frame_id", False),
)


def _metadata(proto: Message) -> str | None:
    parts = []
    for name, quoted in _METADATA_FIELDS:
        value = getattr(proto, name)
        if value:
            parts.append(f"{name}={quote(value) if quoted else value}")
    return "{" + " ".join(parts) + "}" if parts else None


def _number_text(value: float, dtype: str = "f64") -> str:
    """A literal value as XLA prints it: ``%.6g`` (``%.15g`` for f64) when that reads back to
    the same value, else ``%.9g`` (``%.17g``); narrow floats are printed as f32."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if dtype == "f64":
        text = f"{value:.15g}"
        return text if float(text) == value else f"{value:.17g}"
    text = f"{value:.6g}"
    return text if _round_f32(float(text)) == _round_f32(value) else f"{value:.9g}"


def _round_f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _literal_values(proto: Message, dtype: str, count: int) -> list[str] | None:
    if dtype == "pred":
        return ["true" if v else "false" for v in proto.preds]
    if dtype == "f32":
        return [_number_text(v, "f32") for v in proto.f32s]
    if dtype == "f64":
        return [_number_text(v) for v in proto.f64s]
    if dtype == "s32":
        return [str(v) for v in proto.s32s]
    if dtype == "s64":
        return [str(v) for v in proto.s64s]
    if dtype == "u32":
        return [str(v) for v in proto.u32s]
    if dtype == "u64":
        return [str(v) for v in proto.u64s]
    if dtype == "u8":
        return [str(v) for v in proto.u8s]
    if dtype == "s8":
        return [str(v) for v in struct.unpack(f"<{len(proto.s8s)}b", proto.s8s)]
    if dtype in ("bf16", "f16"):
        raw = proto.bf16s if dtype == "bf16" else proto.f16s
        halves = struct.unpack(f"<{len(raw) // 2}H", raw)
        if dtype == "bf16":
            values = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        else:
            values = [struct.unpack("<e", struct.pack("<H", h))[0] for h in halves]
        return [_number_text(v, dtype) for v in values]
    return None


def _literal(proto: Message, shape: Shape) -> str:
    """A constant's literal text (``{...}`` for large or unsupported literals)."""
    if shape.dtype == "tuple" or not shape.is_array:
        return "{...}"
    count = shape.num_elements
    values = _literal_values(proto, shape.dtype, count)
    if values is None or len(values) != count or count > 64:
        return "{...}"
    if not shape.dims:
        return values[0]

    def nest(dims: tuple[int, ...], flat: list[str]) -> str:
        if len(dims) == 1:
            return "{" + ", ".join(flat) + "}"
        step = len(flat) // dims[0] if dims[0] else 0
        return (
            "{"
            + ", ".join(nest(dims[1:], flat[i * step : (i + 1) * step]) for i in range(dims[0]))
            + "}"
        )

    return nest(shape.dims, values)


# ---------------------------------------------------------------------- instructions


def _attributes(
    proto: Message, computations: dict[int, str], names: dict[int, str], shape: Shape
) -> dict[str, str]:
    """The instruction's attributes, in the order and text form XLA's printer uses."""
    opcode = proto.opcode
    attrs: dict[str, str] = {}
    called = [computations.get(i, f"computation.{i}") for i in proto.called_computation_ids]

    # Printed even when empty for these; only when present for the collectives/sort/map.
    always_dims = ("broadcast", "transpose", "reverse", "reduce", "concatenate")
    if opcode in always_dims or (opcode in ("sort", "map") and proto.dimensions):
        attrs["dimensions"] = _ints(proto.dimensions)
    if opcode == "iota":
        attrs["iota_dimension"] = str(proto.dimensions[0] if proto.dimensions else 0)
    if opcode == "get-tuple-element":
        attrs["index"] = str(proto.tuple_index)
    if opcode == "reduce-precision":
        attrs["exponent_bits"] = str(proto.exponent_bits)
        attrs["mantissa_bits"] = str(proto.mantissa_bits)
    if opcode == "slice":
        attrs["slice"] = (
            "{"
            + ", ".join(
                f"[{d.start}:{d.limit}]" if d.stride == 1 else f"[{d.start}:{d.limit}:{d.stride}]"
                for d in proto.slice_dimensions
            )
            + "}"
        )
    if opcode == "dynamic-slice":
        attrs["dynamic_slice_sizes"] = _ints(proto.dynamic_slice_sizes)
    if opcode == "pad":
        attrs["padding"] = "x".join(
            f"{d.edge_padding_low}_{d.edge_padding_high}"
            + (f"_{d.interior_padding}" if d.interior_padding else "")
            for d in proto.padding_config.dimensions
        )
    if proto.HasField("window") and proto.window.dimensions:
        attrs["window"] = _window(proto.window)
    if proto.HasField("convolution_dimension_numbers"):
        rank = (
            len(shape.dims)
            if shape.is_array
            else len(proto.convolution_dimension_numbers.input_spatial_dimensions) + 2
        )
        attrs["dim_labels"] = _dim_labels(proto.convolution_dimension_numbers, rank)
    if opcode == "convolution" or proto.HasField("convolution_dimension_numbers"):
        if proto.feature_group_count > 1:
            attrs["feature_group_count"] = str(proto.feature_group_count)
        if proto.batch_group_count > 1:
            attrs["batch_group_count"] = str(proto.batch_group_count)
    if proto.HasField("dot_dimension_numbers"):
        dnums = proto.dot_dimension_numbers
        if dnums.lhs_batch_dimensions:
            attrs["lhs_batch_dims"] = _ints(dnums.lhs_batch_dimensions)
        attrs["lhs_contracting_dims"] = _ints(dnums.lhs_contracting_dimensions)
        if dnums.rhs_batch_dimensions:
            attrs["rhs_batch_dims"] = _ints(dnums.rhs_batch_dimensions)
        attrs["rhs_contracting_dims"] = _ints(dnums.rhs_contracting_dimensions)
    if proto.HasField("precision_config"):
        precisions = list(proto.precision_config.operand_precision)
        if any(precisions):
            names = _enum_names_nested("PrecisionConfig", "Precision")
            attrs["operand_precision"] = (
                "{" + ",".join(names.get(p, "DEFAULT").lower() for p in precisions) + "}"
            )
    if proto.HasField("gather_dimension_numbers"):
        g = proto.gather_dimension_numbers
        attrs["offset_dims"] = _ints(g.offset_dims)
        attrs["collapsed_slice_dims"] = _ints(g.collapsed_slice_dims)
        attrs["start_index_map"] = _ints(g.start_index_map)
        if g.operand_batching_dims:
            attrs["operand_batching_dims"] = _ints(g.operand_batching_dims)
        if g.start_indices_batching_dims:
            attrs["start_indices_batching_dims"] = _ints(g.start_indices_batching_dims)
        attrs["index_vector_dim"] = str(g.index_vector_dim)
        attrs["slice_sizes"] = _ints(proto.gather_slice_sizes)
    if proto.HasField("scatter_dimension_numbers"):
        s = proto.scatter_dimension_numbers
        attrs["update_window_dims"] = _ints(s.update_window_dims)
        attrs["inserted_window_dims"] = _ints(s.inserted_window_dims)
        attrs["scatter_dims_to_operand_dims"] = _ints(s.scatter_dims_to_operand_dims)
        if s.input_batching_dims:
            attrs["input_batching_dims"] = _ints(s.input_batching_dims)
        if s.scatter_indices_batching_dims:
            attrs["scatter_indices_batching_dims"] = _ints(s.scatter_indices_batching_dims)
        attrs["index_vector_dim"] = str(s.index_vector_dim)
    if opcode in ("gather", "scatter") and proto.indices_are_sorted:
        attrs["indices_are_sorted"] = "true"
    if opcode == "scatter" and proto.unique_indices:
        attrs["unique_indices"] = "true"
    if opcode == "compare":
        if proto.comparison_direction:
            attrs["direction"] = proto.comparison_direction
        if proto.comparison_type == "TOTALORDER":
            attrs["type"] = proto.comparison_type
    if opcode == "sort" and proto.is_stable:
        attrs["is_stable"] = "true"
    if opcode == "topk":
        attrs["k"] = str(proto.k)
        if proto.largest:
            attrs["largest"] = "true"
    if opcode == "fft":
        attrs["fft_type"] = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}.get(proto.fft_type, "FFT")
        attrs["fft_length"] = _ints(proto.fft_length)
    if opcode.startswith("batch-norm"):
        attrs["epsilon"] = _number_text(proto.epsilon)
        attrs["feature_index"] = str(proto.feature_index)
    if opcode == "rng":
        attrs["distribution"] = {1: "rng_uniform", 2: "rng_normal"}.get(
            proto.distribution, "rng_uniform"
        )
    if opcode == "rng-bit-generator":
        attrs["algorithm"] = {0: "rng_default", 1: "rng_three_fry", 2: "rng_philox"}.get(
            proto.rng_algorithm, "rng_default"
        )
    if opcode in ("send", "recv", "send-done", "recv-done") and proto.is_host_transfer:
        attrs["is_host_transfer"] = "true"
    if proto.channel_id > 0:
        attrs["channel_id"] = str(proto.channel_id)
    collective = opcode.replace("-start", "") in (
        "all-reduce",
        "all-gather",
        "all-to-all",
        "reduce-scatter",
        "collective-broadcast",
        "ragged-all-to-all",
    )
    if collective:
        groups = _replica_groups(proto)
        if groups is not None:
            attrs["replica_groups"] = groups
        if proto.constrain_layout:
            attrs["constrain_layout"] = "true"
        # The gathered / split / scattered dimension: XLA prints it before
        # use_global_device_ids for all-gather and all-to-all, after it for reduce-scatter.
        late_dims = opcode.startswith("reduce-scatter")
        if proto.dimensions and not late_dims:
            attrs["dimensions"] = _ints(proto.dimensions)
        if proto.use_global_device_ids:
            attrs["use_global_device_ids"] = "true"
        if proto.dimensions and late_dims:
            attrs["dimensions"] = _ints(proto.dimensions)
    if proto.source_target_pairs:
        attrs["source_target_pairs"] = (
            "{" + ",".join(f"{{{p.source},{p.target}}}" for p in proto.source_target_pairs) + "}"
        )
    if opcode == "custom-call":
        attrs["custom_call_target"] = quote(proto.custom_call_target)
        if proto.custom_call_has_side_effect:
            attrs["custom_call_has_side_effect"] = "true"
        if proto.custom_call_schedule:
            attrs["schedule"] = {1: "SCHEDULE_LATEST", 2: "SCHEDULE_EARLIEST"}.get(
                proto.custom_call_schedule, "SCHEDULE_NONE"
            )
        if proto.custom_call_api_version not in (0, 1):
            attrs["api_version"] = {
                2: "API_VERSION_STATUS_RETURNING",
                3: "API_VERSION_STATUS_RETURNING_UNIFIED",
                4: "API_VERSION_TYPED_FFI",
            }.get(proto.custom_call_api_version, str(proto.custom_call_api_version))
    if proto.output_operand_aliasing:
        attrs["output_to_operand_aliasing"] = (
            "{"
            + ", ".join(
                f"{_ints(alias.output_shape_index)}: "
                f"({alias.operand_index}, {_ints(alias.operand_shape_index)})"
                for alias in proto.output_operand_aliasing
            )
            + "}"
        )
    if proto.WhichOneof("optional_cross_program_prefetch_index"):
        attrs["cross_program_prefetch_index"] = str(proto.cross_program_prefetch_index)
    if opcode == "fusion":
        attrs["kind"] = proto.fusion_kind or "kLoop"
    # Called computations, named the way the printer names each role.
    if called:
        if opcode == "while" and len(called) == 2:
            attrs["condition"] = called[1]
            attrs["body"] = called[0]
        elif opcode == "conditional":
            attrs["branch_computations"] = "{" + ", ".join(called) + "}"
        elif opcode == "select-and-scatter" and len(called) == 2:
            attrs["select"] = called[0]
            attrs["scatter"] = called[1]
        elif opcode in ("fusion", "async-start"):
            attrs["calls"] = called[0] if len(called) == 1 else "{" + ", ".join(called) + "}"
        elif opcode == "custom-call":
            attrs["called_computations"] = "{" + ", ".join(called) + "}"
        else:
            attrs["to_apply"] = called[0] if len(called) == 1 else "{" + ", ".join(called) + "}"
    if proto.async_execution_thread and proto.async_execution_thread != "main":
        attrs["async_execution_thread"] = quote(proto.async_execution_thread)
    if proto.HasField("sharding"):
        attrs["sharding"] = _sharding(proto.sharding)
    if proto.HasField("domain_entry_sharding"):
        attrs["domain"] = (
            '{kind="sharding", entry='
            + _sharding(proto.domain_entry_sharding)
            + ", exit="
            + _sharding(proto.domain_exit_sharding)
            + "}"
        )
    if proto.frontend_attributes.map:
        attrs["frontend_attributes"] = frontend_attributes_text(proto.frontend_attributes)
    if proto.control_predecessor_ids:
        attrs["control-predecessors"] = (
            "{" + ",".join(names.get(i, str(i)) for i in proto.control_predecessor_ids) + "}"
        )
    if proto.infeed_config:
        attrs["infeed_config"] = quote(proto.infeed_config.decode("utf-8", "replace"))
    if proto.outfeed_config:
        attrs["outfeed_config"] = quote(proto.outfeed_config.decode("utf-8", "replace"))
    if proto.HasField("metadata"):
        metadata = _metadata(proto.metadata)
        if metadata is not None:
            attrs["metadata"] = metadata
    if proto.backend_config:
        text = proto.backend_config.decode("utf-8", "replace")
        attrs["backend_config"] = text if text.startswith("{") else quote(text)
    return attrs


def frontend_attributes_text(attributes: Message) -> str:
    """A ``FrontendAttributes`` message as XLA prints it: ``{key="value",...}``, keys sorted."""
    pairs = sorted(attributes.map.items())
    return "{" + ",".join(f"{key}={quote(value)}" for key, value in pairs) + "}"
