"""How a program is split over devices: the device mesh, each collective's axes, global shapes.

``infer_mesh(module)`` (``mesh.py``) finds the smallest device mesh that explains every device
group in the module and names each collective's axes — with the program's own axis names where
it carries them (``program.py``).  ``describe(module)`` (``describe.py``) follows the per-device
split of every value through the program (``propagate.py``, ``matmul.py``, arithmetic in
``splits.py``) to recover each matmul's global shapes and the axes that split each dim, adds the
collectives around each matmul as evidence (``evidence.py``) and labels the parallelism
strategies (``strategy.py``).
"""

from profan.sharding.describe import describe
from profan.sharding.mesh import CollectiveAxes, Mesh, MeshAxis, infer_mesh
from profan.sharding.model import MatmulSharding, ShardingReport, StrategyLabel
from profan.sharding.program import ProgramMesh, program_mesh
from profan.sharding.splits import Chunk, DimSplit, ValueSplit

__all__ = [
    "Chunk",
    "CollectiveAxes",
    "DimSplit",
    "MatmulSharding",
    "Mesh",
    "MeshAxis",
    "ProgramMesh",
    "ShardingReport",
    "StrategyLabel",
    "ValueSplit",
    "describe",
    "infer_mesh",
    "program_mesh",
]
