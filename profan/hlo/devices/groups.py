"""Replica groups and source-target pairs as explicit device lists."""

from __future__ import annotations

from profan.hlo.devices.mesh import MeshSpec, mesh_groups, read_mesh
from profan.hlo.devices.reader import Reader, read_iota_tail


def decode_replica_groups(text: str, *, num_devices: int | None = None) -> list[list[int]]:
    """The device groups of a ``replica_groups=`` value, as explicit lists.

    ``{}`` means one group holding every device: it decodes to ``[]`` when ``num_devices`` is not
    given (the caller knows the count from ``replica_count``/``num_partitions``), else to
    ``[[0, 1, …, num_devices-1]]``.
    """
    reader = Reader(text.strip(), "replica_groups")
    if reader.peek("mesh") or reader.peek("@mesh"):
        groups = mesh_groups(reader)
    elif reader.peek("["):
        shape = reader.int_list("[", "]")
        if len(shape) != 2 or min(shape) <= 0:
            raise reader.error(f"iota replica groups need [groups,size], found {shape}")
        reader.expect("<=")
        flat = read_iota_tail(reader, shape[0] * shape[1])
        groups = [flat[i * shape[1] : (i + 1) * shape[1]] for i in range(shape[0])]
    else:
        reader.expect("{")
        groups = []
        if not reader.accept("}"):
            while True:
                groups.append(reader.int_list("{", "}"))
                if reader.accept("}"):
                    break
                reader.expect(",")
        if not groups and num_devices is not None:
            groups = [list(range(num_devices))]
    if not reader.at_end():
        raise reader.error(f"unexpected text {reader.text[reader.pos : reader.pos + 12]!r}")
    return groups


def replica_groups_mesh(text: str) -> MeshSpec | None:
    """The named mesh of a mesh-form ``replica_groups=`` value (``mesh['data'=4,'model'=2]
    {'data'}`` or ``@mesh<...>``), ``None`` for the explicit and iota forms.  Bad mesh text
    raises ``HloSyntaxError``."""
    reader = Reader(text.strip(), "replica_groups")
    if not (reader.peek("mesh") or reader.peek("@mesh")):
        return None
    return read_mesh(reader)


def decode_source_target_pairs(text: str) -> list[tuple[int, int]]:
    """``{{0,1},{1,2}}`` → ``[(0, 1), (1, 2)]`` (``{}`` → ``[]``)."""
    reader = Reader(text.strip(), "source_target_pairs")
    reader.expect("{")
    pairs: list[tuple[int, int]] = []
    if not reader.accept("}"):
        while True:
            start = reader.pos
            pair = reader.int_list("{", "}")
            if len(pair) != 2:
                reader.pos = start
                raise reader.error(f"a pair needs two ids, found {pair}", "{source,target}")
            pairs.append((pair[0], pair[1]))
            if reader.accept("}"):
                break
            reader.expect(",")
    if not reader.at_end():
        raise reader.error(f"unexpected text {reader.text[reader.pos : reader.pos + 12]!r}")
    return pairs


def group_problems(groups: list[list[int]], num_devices: int | None = None) -> list[str]:
    """What is wrong with a set of groups (empty when nothing): repeats, unequal sizes, gaps."""
    problems: list[str] = []
    seen: dict[int, int] = {}
    for index, group in enumerate(groups):
        for device in group:
            if device < 0:
                problems.append(f"negative device id {device} in group {index}")
            if device in seen:
                problems.append(
                    f"device {device} is in group {seen[device]} and group {index}"
                    if seen[device] != index
                    else f"device {device} appears twice in group {index}"
                )
            seen[device] = index
    sizes = sorted({len(g) for g in groups})
    if len(sizes) > 1:
        problems.append(f"groups have unequal sizes {sizes}")
    if num_devices is not None and seen:
        missing = sorted(set(range(num_devices)) - set(seen))
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (" …" if len(missing) > 8 else "")
            problems.append(f"{len(missing)} of {num_devices} devices are in no group ({shown})")
        beyond = sorted(d for d in seen if d >= num_devices)
        if beyond:
            problems.append(f"device ids {beyond[:8]} exceed the {num_devices} devices")
    return problems
