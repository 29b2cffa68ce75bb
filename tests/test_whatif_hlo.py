"""``profan whatif --hlo``: one program at two batch sizes (fixtures/whatif/, CPU, 8 devices),
each projected from the other's profile and checked against the other's measured step."""

from __future__ import annotations

import pytest

from profan.commands.whatif import recompiled_roofline
from profan.report.analysis.pipeline import report_for, resolve_layout
from profan.report.model import Report
from profan.whatif.project import project_hlo
from tests.conftest import FIXTURES_DIR

PAIRS = [("mlp_batch2048", "mlp_batch4096"), ("mlp_batch4096", "mlp_batch2048")]


def _report(name: str) -> Report:
    trace, hlo = resolve_layout(FIXTURES_DIR / "whatif" / name, None)
    return report_for(trace, hlo=hlo)


@pytest.mark.parametrize(("src", "tgt"), PAIRS)
def test_recompiled_step_within_15_percent(src: str, tgt: str) -> None:
    source = _report(src)
    hlo = str(FIXTURES_DIR / "whatif" / tgt / "hlo")
    projection = project_hlo(source, recompiled_roofline(hlo, source), hlo)
    measured = _report(tgt).summary.step_time_median_s
    assert abs(projection.projected_step_s / measured - 1) < 0.15
    # every op of the recompiled program found its counterpart by name, and says so
    assert projection.ops and all(op.rests_on.startswith("same name") for op in projection.ops)
    # the work doubles or halves with the batch: the device's busy time follows it
    ratio = projection.projected_busy_s / projection.busy_s
    assert ratio == pytest.approx(2.0 if "2048" in src else 0.5, rel=0.2)
