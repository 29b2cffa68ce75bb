"""Per step: the ideal step time against the measured one, MFU, and where the op time went.

``ideal_s`` is, on the busiest device, the larger of the synchronous ops' rooflines summed and the
busiest link's async traffic (host-to-device, device-to-host and ICI transfers may overlap
compute but not each other on one link).  ``mfu`` is the step's FLOPs over all its devices (the
trace's ``model_flops`` where it has them, else profan's FLOPs) divided by the chip's dense bf16
peak x step time x devices in the step.  ``share_<bound>`` is the share of op time whose op is
bound by it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from profan.chips import Chip
from profan.roofline.spans import key_column
from profan.roofline.terms import BOUNDS

if TYPE_CHECKING:
    from profan.trace.profile import Profile

# MFU is measured against the chip's dense peak for this dtype (the figure vendors quote).
MFU_PEAK_DTYPE = "bf16"

STEP_COLUMNS = ["step", "measured_s", "ideal_s", "efficiency", "mfu", "model_flops"] + [
    f"share_{bound}" for bound in (*BOUNDS, "unknown")
]


def step_rows(profile: Profile, chip: Chip, per_op: pd.DataFrame) -> pd.DataFrame:
    """One row per step: measured time, ideal time, efficiency, MFU and time shares per bound."""
    ops = profile.ops
    if ops.empty or "step" not in ops or profile.steps is None or profile.steps.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    per_exec = pd.DataFrame(
        {
            "_key": key_column(per_op["module_key"]),
            "op_name": per_op["name"],
            "_roofline": per_op["roofline_s"] / per_op["occurrences"],
            "_flops": pd.to_numeric(per_op["flops"], errors="coerce") / per_op["occurrences"],
            "_bound": per_op["bound_by"],
            "_async": per_op["async_role"].notna(),
            "_link": per_op["link"],
        }
    )
    columns = ["module_key", "op_name", "step", "duration_s"]
    columns += [c for c in ("device", "trace_model_flops") if c in ops]
    frame = ops[columns].assign(_key=key_column(ops["module_key"]))
    frame = frame[frame["step"].notna()]
    if "device" not in frame:
        frame = frame.assign(device=0)
    frame = frame.merge(per_exec, on=["_key", "op_name"], how="left")
    frame["_roofline"] = frame["_roofline"].fillna(0.0)
    frame["_bound"] = frame["_bound"].fillna("unknown")
    frame["_async"] = frame["_async"].fillna(False).astype(bool)
    # Ideal step on the busiest device: synchronous ops run one after another; async transfers
    # can hide behind them, but each link (host in/out, ICI) must still carry its own traffic.
    sync = frame[~frame["_async"]].groupby(["step", "device"])["_roofline"].sum()
    pools = frame[frame["_async"]].groupby(["step", "device", "_link"])["_roofline"].sum()
    pool_max = pools.groupby(level=["step", "device"]).max()
    per_device = pd.concat([sync, pool_max], axis=1).fillna(0.0).max(axis=1)
    ideal = per_device.groupby(level="step").max()
    devices = frame.groupby("step")["device"].nunique().clip(lower=1)
    profan_flops = frame.groupby("step")["_flops"].sum()
    if "trace_model_flops" in frame:
        model = frame.groupby("step")["trace_model_flops"].sum(min_count=1)
        model_flops = model.fillna(profan_flops)
    else:
        model_flops = profan_flops
    op_time = frame.groupby("step")["duration_s"].sum()
    by_bound = frame.groupby(["step", "_bound"])["duration_s"].sum().unstack(fill_value=0.0)
    peak = chip.device_peak_flops(MFU_PEAK_DTYPE)
    rows = []
    for step_row in profile.steps.itertuples(index=False):
        step = step_row.step
        if step not in ideal.index:
            continue
        measured = float(step_row.duration_s)
        total = float(op_time.get(step, 0.0)) or 1.0
        shares = {
            f"share_{b}": float(by_bound.at[step, b]) / total if b in by_bound else 0.0
            for b in BOUNDS
        }
        shares["share_unknown"] = max(0.0, 1.0 - sum(shares.values()))
        step_ideal = float(ideal[step])
        step_model = float(model_flops.get(step, 0.0))
        rows.append(
            {
                "step": step,
                "measured_s": measured,
                "ideal_s": step_ideal,
                "efficiency": step_ideal / measured if measured > 0 else math.nan,
                "mfu": (
                    step_model / (peak * measured * int(devices[step]))
                    if measured > 0
                    else math.nan
                ),
                "model_flops": step_model,
                **shares,
            }
        )
    return pd.DataFrame(rows, columns=STEP_COLUMNS)
