"""The numpy bulk event decoder against protobuf's own per-message decode, and the schema loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profan.arrays import distinct
from profan.trace.schema import load_schema
from profan.trace.wire import KIND_BYTES, KIND_STR, WireError, decode_events

CLASSES = load_schema("xplane.proto")


def _check_line(plane, line_view, line_full) -> int:
    events = decode_events(list(line_view.events))
    assert len(events) == len(line_full.events)
    for index, event in enumerate(line_full.events):
        assert events.index[index] == index
        assert events.metadata_id[index] == event.metadata_id
        assert events.offset_ps[index] == event.offset_ps
        assert events.duration_ps[index] == event.duration_ps
        rows = np.flatnonzero(events.stat_event == index)
        assert len(rows) == len(event.stats)
        for row, stat in zip(rows, event.stats, strict=True):
            assert events.stat_metadata_id[row] == stat.metadata_id
            which = stat.WhichOneof("value")
            value = getattr(stat, which)
            if which in ("int64_value",):
                assert events.stat_int[row] == value
            elif which in ("uint64_value", "ref_value"):
                assert int(np.int64(events.stat_int[row]).view(np.uint64)) == value
            elif which == "double_value":
                assert events.stat_double[row] == value
            else:
                raw = events.stat_text(row)
                assert raw == (value.encode() if isinstance(value, str) else value)
    return len(line_full.events)


@pytest.mark.parametrize(
    "relative",
    [
        "traces/tpu_v6e_inference.xplane.pb",
        "traces/mi300x_jax_conv.xplane.pb",
        "traces/mi300x_jax_conv_legacy.xplane.pb",
    ],
)
def test_bulk_decode_equals_protobuf_decode(corpus_dir: Path, relative: str) -> None:
    data = (corpus_dir / relative).read_bytes()
    full = CLASSES["tensorflow.profiler.XSpace"].FromString(data)
    view = CLASSES["tensorflow.profiler.XSpaceView"].FromString(data)
    checked = 0
    for plane_full, plane_view in zip(full.planes, view.planes, strict=True):
        for line_full, line_view in zip(plane_full.lines, plane_view.lines, strict=True):
            checked += _check_line(plane_full, line_view, line_full)
    assert checked > 1000


def test_bulk_decode_on_cpu_fixture(fixtures_dir: Path) -> None:
    data = next((fixtures_dir / "transformer" / "trace").rglob("*.xplane.pb")).read_bytes()
    full = CLASSES["tensorflow.profiler.XSpace"].FromString(data)
    view = CLASSES["tensorflow.profiler.XSpaceView"].FromString(data)
    plane = next(i for i, p in enumerate(full.planes) if p.name == "/host:CPU")
    checked = sum(
        _check_line(full.planes[plane], lv, lf)
        for lf, lv in zip(full.planes[plane].lines, view.planes[plane].lines, strict=True)
    )
    assert checked > 6000


def test_require_stats_keeps_exactly_the_events_holding_them(fixtures_dir: Path) -> None:
    data = next((fixtures_dir / "mlp" / "trace").rglob("*.xplane.pb")).read_bytes()
    full = CLASSES["tensorflow.profiler.XSpace"].FromString(data)
    view = CLASSES["tensorflow.profiler.XSpaceView"].FromString(data)
    index = next(i for i, p in enumerate(full.planes) if p.name == "/host:CPU")
    names = {k: m.name for k, m in full.planes[index].stat_metadata.items()}
    hlo_op = next(k for k, n in names.items() if n == "hlo_op")
    for line_full, line_view in zip(
        full.planes[index].lines, view.planes[index].lines, strict=True
    ):
        expected = [
            i
            for i, e in enumerate(line_full.events)
            if any(s.metadata_id == hlo_op for s in e.stats)
        ]
        events = decode_events(
            list(line_view.events), wanted_stats=[hlo_op], require_stats=[hlo_op]
        )
        assert events.index.tolist() == expected
        assert set(events.stat_metadata_id.tolist()) <= {hlo_op}
        # inexact: every event holding it, maybe a few more, each decoded as the exact ones
        loose = decode_events(
            list(line_view.events), wanted_stats=[hlo_op], require_stats=[hlo_op], exact=False
        )
        assert set(expected) <= set(loose.index.tolist())
        holding = np.sort(loose.stat_event[loose.stat_metadata_id == hlo_op])
        assert loose.index[holding].tolist() == expected
        assert loose.duration_ps[holding].tolist() == events.duration_ps.tolist()


event_strategy = st.builds(
    dict,
    metadata_id=st.integers(0, 2**40),
    offset_ps=st.integers(-(2**62), 2**62),
    duration_ps=st.integers(0, 2**62),
    stats=st.lists(
        st.one_of(
            st.tuples(
                st.integers(1, 5000), st.just("int64_value"), st.integers(-(2**63), 2**63 - 1)
            ),
            st.tuples(st.integers(1, 5000), st.just("uint64_value"), st.integers(0, 2**64 - 1)),
            st.tuples(st.integers(1, 5000), st.just("double_value"), st.floats(allow_nan=False)),
            st.tuples(st.integers(1, 5000), st.just("str_value"), st.text(max_size=40)),
            st.tuples(st.integers(1, 5000), st.just("ref_value"), st.integers(0, 2**20)),
        ),
        max_size=6,
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(event_strategy, max_size=20))
def test_bulk_decode_round_trips_random_events(specs: list[dict]) -> None:
    """Synthetic events (hypothesis) serialized by protobuf decode back to the same values."""
    event_type = CLASSES["tensorflow.profiler.XEvent"]
    chunks = []
    for spec in specs:
        event = event_type(
            metadata_id=spec["metadata_id"],
            offset_ps=spec["offset_ps"],
            duration_ps=spec["duration_ps"],
        )
        for stat_id, which, value in spec["stats"]:
            stat = event.stats.add(metadata_id=stat_id)
            setattr(stat, which, value)
        chunks.append(event.SerializeToString())
    events = decode_events(chunks)
    assert events.metadata_id.tolist() == [s["metadata_id"] for s in specs]
    assert events.offset_ps.tolist() == [s["offset_ps"] for s in specs]
    assert events.duration_ps.tolist() == [s["duration_ps"] for s in specs]
    flat = [(i, *stat) for i, s in enumerate(specs) for stat in s["stats"]]
    # stats come pass by pass (every event's first, then every second one...): in event order
    # by a stable sort of their owners, each event's stats in the order it holds them
    in_event_order = np.argsort(events.stat_event, kind="stable")
    assert events.stat_event[in_event_order].tolist() == [i for i, *_ in flat]
    for row, (_, stat_id, which, value) in zip(in_event_order.tolist(), flat, strict=True):
        assert events.stat_metadata_id[row] == stat_id
        if which == "double_value":
            assert events.stat_double[row] == value
        elif which == "str_value":
            assert events.stat_text(row).decode() == value
        elif which == "int64_value":
            assert events.stat_int[row] == value
        else:
            assert int(np.int64(events.stat_int[row]).view(np.uint64)) == value


# ids around the one-byte varint limit (127 | 128), where the decoder changes method
STAT_IDS = (1, 2, 3, 126, 127, 128, 129, 200, 255, 256, 16383, 16384)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(event_strategy, min_size=1, max_size=20),
    st.lists(st.sampled_from(STAT_IDS), min_size=1, max_size=4),
)
def test_wanted_stats_keep_exactly_those_stats(specs: list[dict], wanted: list[int]) -> None:
    """Decoding only some stat ids (ids below 128 are told by one byte, longer ones decoded
    first) keeps exactly the stats with those ids, with their values, as a full decode has
    them."""
    event_type = CLASSES["tensorflow.profiler.XEvent"]
    chunks = []
    for spec in specs:
        event = event_type(metadata_id=spec["metadata_id"], duration_ps=spec["duration_ps"])
        for stat_id, which, value in spec["stats"]:
            setattr(event.stats.add(metadata_id=STAT_IDS[stat_id % len(STAT_IDS)]), which, value)
        chunks.append(event.SerializeToString())
    full = decode_events(chunks)
    some = decode_events(chunks, wanted_stats=wanted)

    def rows(events, keep=None):
        # a text stat's value is its bytes (an empty one too: its stat_int is where it starts
        # in the buffer, no value), any other's its integer; sorted with the text apart
        def value(r):
            if int(events.stat_kind[r]) in (KIND_STR, KIND_BYTES):
                return (1, 0, events.stat_text(r))
            return (0, int(events.stat_int[r]), b"")

        return sorted(
            (int(events.stat_event[r]), int(events.stat_metadata_id[r]), int(events.stat_kind[r]),
             value(r), float(events.stat_double[r]))
            for r in range(len(events.stat_event))
            if keep is None or events.stat_metadata_id[r] in keep
        )  # fmt: skip

    assert rows(some) == rows(full, set(wanted))


def test_damaged_event_bytes_raise_wire_error() -> None:
    event = CLASSES["tensorflow.profiler.XEvent"](metadata_id=3, offset_ps=10**12, duration_ps=5)
    event.stats.add(metadata_id=2, str_value="hello")
    data = event.SerializeToString()
    with pytest.raises(WireError):
        decode_events([data[:-3]])


def test_schema_field_numbers_follow_xplane_proto() -> None:
    event = CLASSES["tensorflow.profiler.XEvent"].DESCRIPTOR
    assert {f.name: f.number for f in event.fields} == {
        "metadata_id": 1,
        "offset_ps": 2,
        "num_occurrences": 5,
        "duration_ps": 3,
        "stats": 4,
    }
    plane = CLASSES["tensorflow.profiler.XPlane"].DESCRIPTOR
    assert plane.fields_by_name["event_metadata"].message_type.GetOptions().map_entry
    hlo = load_schema("hlo.proto")["xla.HloInstructionProto"].DESCRIPTOR
    assert hlo.fields_by_name["operand_ids"].number == 36
    assert hlo.fields_by_name["collective_device_list"].number == 87


@settings(max_examples=60, deadline=None)
@given(st.lists(event_strategy, min_size=1, max_size=10), st.randoms(use_true_random=False))
def test_fields_in_any_order(specs: list[dict], rnd) -> None:
    """Protobuf allows fields in any order (concatenated messages merge): decode like protobuf."""
    event_type = CLASSES["tensorflow.profiler.XEvent"]
    chunks = []
    for spec in specs:
        parts = [
            event_type(metadata_id=spec["metadata_id"]).SerializeToString(),
            event_type(offset_ps=spec["offset_ps"]).SerializeToString(),
            event_type(duration_ps=spec["duration_ps"]).SerializeToString(),
        ]
        for stat_id, which, value in spec["stats"]:
            part = event_type()
            setattr(part.stats.add(metadata_id=stat_id), which, value)
            parts.append(part.SerializeToString())
        rnd.shuffle(parts)
        chunks.append(b"".join(parts))
    events = decode_events(chunks)
    for index, chunk in enumerate(chunks):
        expected = event_type.FromString(chunk)
        assert events.metadata_id[index] == expected.metadata_id
        assert events.offset_ps[index] == expected.offset_ps
        assert events.duration_ps[index] == expected.duration_ps
        rows = np.flatnonzero(events.stat_event == index)
        assert sorted(events.stat_metadata_id[rows].tolist()) == sorted(
            s.metadata_id for s in expected.stats
        )


@pytest.mark.parametrize("trace", ["transformer", "multihost"])
def test_lines_decoded_in_chunks_equal_whole_lines(
    fixtures_dir: Path, trace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of 7 events: every line of these real traces is cut many times, at odd places, and
    # each chunk is read on its own: the tables must not change.
    import importlib

    import pandas as pd

    from profan.trace import LoadOptions, planes

    load = importlib.import_module("profan.trace.load")
    options = LoadOptions(workers=1, use_cache=False)
    path = fixtures_dir / trace / "trace"
    whole = load.load_events(path, options)
    monkeypatch.setattr(planes, "DECODE_CHUNK", 7)
    chunked = load.load_events(path, options)
    assert len(whole.ops) > 7 * 10
    pd.testing.assert_frame_equal(whole.ops, chunked.ops)
    pd.testing.assert_frame_equal(whole.steps, chunked.steps)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 600), st.integers(-5, 2**40)), min_size=1, max_size=200))
def test_distinct_as_numpy_unique(values: list[int]) -> None:
    """The count-and-table ``np.unique`` (ref stats hold small stat ids, steps and devices
    are small numbers; anything else takes the sort) gives numpy's ids and inverse."""
    ids = np.array(values, dtype=np.int64)
    found, inverse = distinct(ids)
    expected, expected_inverse = np.unique(ids, return_inverse=True)
    assert found.tolist() == expected.tolist()
    assert inverse.tolist() == expected_inverse.tolist()


def test_field_number_zero_in_an_event_raises_wire_error() -> None:
    # (synthetic bytes: no serializer writes field 0; a varint field 0, then a stat holding one)
    with pytest.raises(WireError, match="field number 0"):
        decode_events([b"\x08\x03\x00\x00"])
    with pytest.raises(WireError):
        decode_events([b"\x08\x03\x22\x04\x08\x02\x00\x05"])


@pytest.mark.parametrize("wire_type", [3, 4, 6, 7])
def test_impossible_wire_types_raise_wire_error(wire_type: int) -> None:
    with pytest.raises(WireError):
        decode_events([bytes([0x08, 0x03, 5 << 3 | wire_type, 0x00])])


def test_synthetic_zeros_file_refused_at_once(tmp_path: Path) -> None:
    """40 MB of zeros (synthetic) is field 0 at its first byte: refused before reading on
    (it took 32 s)."""
    import time

    from profan.errors import TraceError
    from profan.trace.xplane import read_host

    zeros = tmp_path / "synthetic_zeros.xplane.pb"
    zeros.write_bytes(bytes(40 * 2**20))
    started = time.perf_counter()
    with pytest.raises(TraceError, match="field number 0 at byte 0"):
        read_host(str(zeros), "synthetic_zeros")
    assert time.perf_counter() - started < 1


def test_damaged_wire_type_in_the_file_refused(tmp_path: Path) -> None:
    damaged = tmp_path / "synthetic_group.xplane.pb"
    damaged.write_bytes(bytes([1 << 3 | 3]) + bytes(100))  # field 1 as a (deprecated) group
    from profan.errors import TraceError
    from profan.trace.xplane import read_host

    with pytest.raises(TraceError, match="wire type 3"):
        read_host(str(damaged), "synthetic_group")
