"""Score ops against the roofline: how long each op should have taken, and how close it came.

Per op (MODEL.md section 1, ``terms``): ``t_compute = FLOPs / peak FLOP/s`` (for the math dtype),
``t_hbm = HBM bytes / HBM bandwidth``, ``t_ici`` = the collective's time (section 4,
``interconnect``), ``t_host`` for copies between host memory and HBM (PCIe); ``roofline =
max(...)``, ``bound_by`` = the largest term, ``efficiency = roofline / measured``.

Async pairs are scored on their ``-done`` over the transfer's start-to-done spans (``spans``).
Per step (``steps``): the ideal step on the busiest device against the measured step, and MFU.
``score(profile, chip, *, shardings)`` scores a loaded trace (``score``, ``ops``, ``facts``): one
``OpRecord`` per op (``ops``), one ``StepRecord`` per step (``steps``) and a ``Summary``;
``score_module(module, chip)`` is the same arithmetic on a bare HLO module (``module``): one
``ModuleOpRecord`` per op it runs.
"""

from profan.roofline.facts import CollectiveFacts
from profan.roofline.interconnect import CollectiveTime, collective_time, latency_floor_s
from profan.roofline.module import ModuleOpRecord, score_module
from profan.roofline.ops import OpRecord
from profan.roofline.score import Score, Summary, resolve_chip, score
from profan.roofline.spans import AsyncSpans, async_spans
from profan.roofline.steps import MFU_PEAK_DTYPE, StepRecord
from profan.roofline.terms import BOUNDS, OpTimes, op_times

__all__ = [
    "BOUNDS",
    "MFU_PEAK_DTYPE",
    "AsyncSpans",
    "CollectiveFacts",
    "CollectiveTime",
    "ModuleOpRecord",
    "OpRecord",
    "OpTimes",
    "Score",
    "StepRecord",
    "Summary",
    "async_spans",
    "collective_time",
    "latency_floor_s",
    "op_times",
    "resolve_chip",
    "score",
    "score_module",
]
