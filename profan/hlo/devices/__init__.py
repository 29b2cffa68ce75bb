"""Device lists in HLO attributes, decoded: replica groups, source-target pairs, shardings.

The parser keeps ``replica_groups=…``, ``source_target_pairs=…`` and ``sharding=…`` as raw text;
the pure functions here turn that text into explicit device ids.  Every printed form expands to
the same explicit lists for equivalent inputs:

* explicit groups ``{{0,1},{2,3}}``; empty ``{}`` (one group of all devices);
* iota groups ``[G,S]<=[N]`` and ``[G,S]<=[d0,d1,…]T(p0,p1,…)``: the ids ``0..N-1`` laid out in
  the shape ``[d0,d1,…]``, transposed by the permutation, flattened and cut into ``G`` groups of
  ``S``;
* mesh groups ``mesh['x'=4,'y'=2] {'x'}`` (also ``@mesh<x=4,y=2> {x}``, optional
  ``device_ids=(…)`` or ``device_ids=([…]T(…))``, sub-axes ``'x':(pre)size``): each group is the
  devices that differ only in the listed axes (first listed axis is the slowest-varying member
  of a group); groups run over the other axes in mesh order.

Sub-axis ``'x':(p)s`` names the piece of axis ``x`` of size ``s`` whose more-major pieces
multiply to ``p`` (so ``'x':(1)2`` of ``x=8`` is the major factor 2).

Bad text raises ``profan.errors.HloSyntaxError`` naming the column and what was expected.
"""

from profan.hlo.devices.groups import (
    decode_replica_groups,
    decode_source_target_pairs,
    group_problems,
    replica_groups_mesh,
)
from profan.hlo.devices.mesh import AxisRef, MeshSpec, decode_sdy_mesh
from profan.hlo.devices.reader import iota_devices
from profan.hlo.devices.sharding import SUBGROUP_TYPES, Sharding, decode_sharding

__all__ = [
    "SUBGROUP_TYPES",
    "AxisRef",
    "MeshSpec",
    "Sharding",
    "decode_replica_groups",
    "decode_sdy_mesh",
    "decode_sharding",
    "decode_source_target_pairs",
    "group_problems",
    "iota_devices",
    "replica_groups_mesh",
]
