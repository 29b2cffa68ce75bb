"""End to end through the CLI (``python -m profan …`` in a subprocess): report, check, diff,
annotate on real fixture traces and the corpus."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import FIXTURES_DIR, REPO_ROOT

REPO = REPO_ROOT
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")


def profan(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profan", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def mlp_baseline(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("baseline")
    done = profan(env, "report", str(FIXTURES_DIR / "mlp"), "--format", "json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out / "report.json"


@pytest.fixture()
def budget_file(tmp_path: Path) -> Path:
    path = tmp_path / "profan.toml"
    path.write_text("[baseline]\nstep_time_tolerance = 0.10\nnew_collectives = true\n")
    return path


def test_report_terminal_plain_when_piped(env: dict[str, str]) -> None:
    done = profan(env, "report", str(FIXTURES_DIR / "mlp"), "--top", "5")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b[" not in out  # piped: no colour codes
    assert "device   8 × " in out
    steps = json.loads((FIXTURES_DIR / "mlp/meta.json").read_text())["trace"]["steps"]
    assert f"steps    {steps} " in out
    assert "Top 5 ops of" in out
    assert "time by category" in out and "time by bound" in out
    assert "exposed (not overlapped with compute)" in out
    assert "Unmatched:" in out


def test_the_program_leaves_its_output_whole(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m profan`` leaves without the interpreter's teardown (``cli.run``): what it
    printed is all there (byte for byte what ``main`` prints in this process), a reader that
    stops early is no error, and the exit code is ``main``'s."""
    from profan.cli import main

    args = ["report", str(FIXTURES_DIR / "mlp"), "--format", "json"]
    done = profan(env, *args)
    assert done.returncode == 0, done.stderr
    assert main(args) == 0
    assert done.stdout == capsys.readouterr().out and done.stdout.rstrip().endswith("}")
    head = subprocess.run(
        f"{sys.executable} -m profan report fixtures/mlp | head -c 10",
        shell=True, capture_output=True, text=True, env=env, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert head.returncode == 0 and len(head.stdout) == 10 and not head.stderr, head.stderr
    missing = profan(env, "report", str(REPO / "no-such-trace"))
    assert missing.returncode == 2 and "profan: error" in missing.stderr


def test_report_json_is_the_schema(env: dict[str, str], mlp_baseline: Path) -> None:
    data = json.loads(mlp_baseline.read_text())
    assert data["schema_version"] == 3
    assert {"device", "chip", "steps", "summary", "ops", "unmatched"} <= set(data)
    meta = json.loads((FIXTURES_DIR / "mlp/meta.json").read_text())
    assert data["summary"]["step_count"] == meta["trace"]["steps"]
    names = {op["name"] for op in data["ops"] if op["category"] == "collective"}
    assert names == {c["name"] for c in meta["hlo_collectives"]}
    group_sizes = sorted(op["collective"]["group_size"] for op in data["ops"] if op["collective"])
    assert group_sizes == [2, 4]  # model axis (2), data axis (4)


def test_check_unchanged_profile_passes(
    env: dict[str, str], mlp_baseline: Path, budget_file: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    done = profan(
        env, "check", str(FIXTURES_DIR / "mlp"), "--budget", str(budget_file),
        "--baseline", str(mlp_baseline), "--junit", str(junit),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 failed" in done.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("tests")) >= 3


def test_check_worse_sharding_fails(
    env: dict[str, str], mlp_baseline: Path, budget_file: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "junit.xml"
    done = profan(
        env, "check", str(FIXTURES_DIR / "mlp_worse"), "--budget", str(budget_file),
        "--baseline", str(mlp_baseline), "--junit", str(junit), "--github",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    # the extra all-gather the worse sharding forces is named
    assert "FAIL  baseline.new_collective:" in done.stdout
    assert "all-gather" in done.stdout
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert any("all-gather" in line for line in annotations)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert int(suite.get("failures")) >= 1


def test_check_corrupt_trace_is_unusable_input(
    env: dict[str, str], corpus_dir: Path, budget_file: Path
) -> None:
    done = profan(
        env, "check", str(corpus_dir / "traces/corrupt_utf8_mangled.xplane.pb"),
        "--budget", str(budget_file),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "corrupt_utf8_mangled.xplane.pb" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_bad_budget_is_unusable_input(env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "profan.toml"
    bad.write_text("[budget]\nstep_time_s = 'soon'\n")
    done = profan(env, "check", str(FIXTURES_DIR / "mlp"), "--budget", str(bad))
    assert done.returncode == 2
    assert f"{bad}: budget.step_time_s: must be a number, got a string" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_absolute_budgets(env: dict[str, str], tmp_path: Path, mlp_baseline: Path) -> None:
    data = json.loads(mlp_baseline.read_text())
    median = data["summary"]["step_time_median_s"]
    ok = tmp_path / "ok.toml"
    ok.write_text(f"[budget]\nstep_time_s = {median * 1.01}\n")
    tight = tmp_path / "tight.toml"
    tight.write_text(f"[budget]\nstep_time_s = {median * 0.5}\n")
    assert profan(env, "check", str(mlp_baseline), "--budget", str(ok)).returncode == 0
    done = profan(env, "check", str(mlp_baseline), "--budget", str(tight))
    assert done.returncode == 1 and "FAIL  step_time" in done.stdout


def test_diff_names_the_new_all_gather(env: dict[str, str], mlp_baseline: Path) -> None:
    done = profan(env, "diff", str(mlp_baseline), str(FIXTURES_DIR / "mlp_worse"))
    assert done.returncode == 0, done.stderr
    assert "step time (median)" in done.stdout
    assert "new in B: all-gather" in done.stdout
    # categories sit under their own heading, not under the findings count
    lines = done.stdout.splitlines()
    heading = lines.index(next(line for line in lines if line.startswith("time by category")))
    assert lines[heading - 1].startswith("suspicious findings")
    assert lines[heading + 1].startswith("  ")
    # at 100 columns an op's matching key moves to its own line
    narrow = profan(
        {**env, "COLUMNS": "100"}, "diff", str(mlp_baseline), str(FIXTURES_DIR / "mlp_worse")
    )
    changes = [line for line in narrow.stdout.splitlines() if " -> " in line]
    assert changes and all(len(line) <= 100 for line in changes)
    assert any(line.startswith("      [jit_train_step|") for line in narrow.stdout.splitlines())


def test_annotate_prints_hlo_with_times(env: dict[str, str]) -> None:
    done = profan(env, "annotate", str(FIXTURES_DIR / "mlp"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    annotated = [line for line in lines if "// profan: measured" in line]
    assert any(line.lstrip().startswith(("%all-reduce", "all-reduce")) for line in annotated)
    assert "// per source line: file:line  total time (all devices)  flags" in done.stdout
    assert any("make_fixtures.py:" in line for line in lines if line.startswith("// "))


def test_report_html_and_md_write_files(env: dict[str, str], tmp_path: Path) -> None:
    done = profan(
        env, "report", str(FIXTURES_DIR / "mlp"), "--format", "md", "--out", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "report.md").read_text()
    assert "![roofline](roofline.png)" in md and (tmp_path / "roofline.png").stat().st_size > 1000


def test_report_refuses_to_write_into_trace_dir(env: dict[str, str]) -> None:
    target = FIXTURES_DIR / "mlp/out"
    done = profan(
        env, "report", str(FIXTURES_DIR / "mlp"), "--format", "json", "--out", str(target)
    )
    assert done.returncode == 2 and not target.exists()


def test_report_tpu_trace(env: dict[str, str], corpus_dir: Path) -> None:
    done = profan(env, "report", str(corpus_dir / "traces/tpu_v6e_inference.xplane.pb"))
    assert done.returncode == 0, done.stderr
    assert "4 × TPU v6" in done.stdout
    assert "source: trace" in done.stdout


@pytest.mark.parametrize("columns", [80, 100])
def test_report_fits_columns(env: dict[str, str], columns: int) -> None:
    """``COLUMNS`` sets the width when piped: no line wider, the key columns all there."""
    done = profan({**env, "COLUMNS": str(columns)}, "report", str(FIXTURES_DIR / "transformer"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    header = next(line for line in lines if line.startswith("op "))
    for key in ("op", "category", "measured", "ideal", "bound", "eff"):
        assert key in header.split(), header
    wide = profan({**env, "COLUMNS": "250"}, "report", str(FIXTURES_DIR / "transformer"))
    assert max(len(line) for line in wide.stdout.splitlines()) > columns


def test_check_against_a_per_machine_baseline_file(
    env: dict[str, str], tmp_path: Path, budget_file: Path
) -> None:
    """`--update-baseline` records the mlp profile as its machine's entry; mlp then passes
    against it and mlp_worse fails on the all-gather its sharding adds."""
    baseline = tmp_path / "baselines" / "mlp.json"
    done = profan(
        env, "check", str(FIXTURES_DIR / "mlp"), "--budget", str(budget_file),
        "--baseline", str(baseline), "--update-baseline",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    recorded = json.loads(baseline.read_text())
    assert recorded["format"] == "profan-baseline" and list(recorded["machines"]) == ["CPU/cpu"]
    assert f"recorded CPU/cpu in {baseline}" in done.stderr

    same = profan(env, "check", str(FIXTURES_DIR / "mlp"), "--budget", str(budget_file),
                  "--baseline", str(baseline))  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr
    worse = profan(env, "check", str(FIXTURES_DIR / "mlp_worse"), "--budget", str(budget_file),
                   "--baseline", str(baseline), "--github")  # fmt: skip
    assert worse.returncode == 1, worse.stdout + worse.stderr
    failed = [line for line in worse.stdout.splitlines() if line.startswith("FAIL")]
    assert any("all-gather" in line for line in failed), failed
    assert "::error" in worse.stdout  # annotations for the failed rows

    alone = profan(env, "check", str(FIXTURES_DIR / "mlp"), "--budget", str(budget_file),
                   "--update-baseline")  # fmt: skip
    assert alone.returncode == 2 and "--update-baseline needs --baseline" in alone.stderr


def test_readme_example_is_what_profan_prints(env: dict[str, str]) -> None:
    """Every line of README's example (abridged with …) is a line the first command prints."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("```\nprofan report: fixtures/transformer/trace") + len("```\n")
    example = readme[start : readme.index("```", start)].splitlines()
    done = profan({**env, "COLUMNS": "160"}, "report", "fixtures/transformer")
    assert done.returncode == 0, done.stderr
    printed = set(done.stdout.splitlines())
    shown = [line for line in example if line.strip() not in ("", "…")]
    assert len(shown) > 20
    assert [line for line in shown if line not in printed] == []


def test_mesh_axes_carry_the_programs_own_names(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every fixture whose dump holds the module before optimisations (where JAX writes the
    mesh): the report names the mesh axes as the fixture's meta.json records them (data/model,
    fsdp), and every collective's axes are among them with the sizes of its groups."""
    from profan.cli import main

    checked = 0
    for meta_path in sorted(fixtures_dir.glob("*/meta.json")):
        fixture = meta_path.parent
        meta = json.loads(meta_path.read_text())
        if not meta.get("mesh") or not list((fixture / "hlo").glob("*before_optimizations.txt")):
            continue
        expected = dict(zip(meta["mesh"]["axis_names"], meta["mesh"]["axis_sizes"], strict=True))
        assert main(["report", str(fixture), "--format", "json"]) == 0
        data = json.loads(capsys.readouterr().out)
        (mesh,) = data["summary"]["mesh"].values()
        assert mesh == {k: v for k, v in expected.items() if v > 1} or mesh == expected, fixture
        for op in data["ops"]:
            axes = (op["collective"] or {}).get("axes")
            if axes:
                assert set(axes) <= set(expected), (fixture.name, op["name"], axes)
                if op["collective"]["kind"] != "collective-permute":  # group_size: its pairs
                    assert math.prod(expected[a] for a in axes) == op["collective"]["group_size"]
        checked += 1
    assert checked >= 5
