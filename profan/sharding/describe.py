"""``describe(module)``: the mesh, each collective's axes, each matmul's global shapes and splits,
and the parallelism strategies they add up to."""

from __future__ import annotations

from profan.hlo import views
from profan.hlo.model import Instruction, Module
from profan.hlo.opcodes import CONTROL_FLOW_OPCODES
from profan.hlo.views import called_computations
from profan.sharding.evidence import add_collective_evidence
from profan.sharding.mesh import infer_mesh
from profan.sharding.model import ShardingReport
from profan.sharding.program import ProgramMesh
from profan.sharding.propagate import Propagator
from profan.sharding.strategy import strategies


def describe(module: Module, program: ProgramMesh | None = None) -> ShardingReport:
    """Mesh, per-collective axes, per-matmul local/global shapes and the strategy labels.

    ``program`` is the mesh the program names, when it is known from elsewhere (the module
    before optimisations, which JAX dumps with its mesh); by default it is read from ``module``.
    """
    mesh = infer_mesh(module, program)
    propagator = Propagator(module, mesh)
    propagator.run_computation(module.entry, None, None)
    # Ops in computations the entry does not reach through fusions (while bodies, branches) are
    # followed on their own with unknown parameters.
    reached = {m.computation for m in propagator.matmuls}
    control_bodies = {
        name
        for instruction in module.instructions()
        if instruction.opcode in CONTROL_FLOW_OPCODES
        for name in called_computations(instruction)
    }
    for computation in module.computations:
        if computation.is_entry or computation.name in reached:
            continue
        if computation.name in propagator.followed:
            continue
        if computation.name in control_bodies:
            propagator.run_computation(computation, None, None)
    add_collective_evidence(module, mesh, propagator.matmuls)
    return ShardingReport(
        module=module.name,
        mesh=mesh,
        collectives=mesh.collectives,
        matmuls=propagator.matmuls,
        strategies=strategies(module, mesh, propagator.matmuls),
        notes=propagator.notes,
        global_shapes=annotated_global_shapes(module),
    )


def annotated_global_shape(instruction: Instruction) -> str | None:
    """The global shape of an array output whose ``sharding=`` tiles it (per-device dims × tiles
    per dim, ``f32[64,128]``); ``None`` when it has no such sharding or the tiles do not change
    the shape."""
    sharding = views.sharding(instruction)
    shape = instruction.shape
    if sharding is None or not shape.is_array:
        return None
    tiles = sharding.data_tile_dims
    if len(tiles) < len(shape.dims):
        return None
    scaled = [size * count for size, count in zip(shape.dims, tiles, strict=False)]
    if scaled == list(shape.dims):
        return None
    return f"{shape.dtype}[{','.join(str(size) for size in scaled)}]"


def annotated_global_shapes(module: Module) -> dict[str, str]:
    """``annotated_global_shape`` of every instruction that has one, by name (first wins)."""
    found: dict[str, str] = {}
    for instruction in module.instructions():
        if instruction.name not in found and (shape := annotated_global_shape(instruction)):
            found[instruction.name] = shape
    return found
