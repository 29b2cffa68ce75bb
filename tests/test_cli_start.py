"""A lean start: ``import profan`` and the commands that need no tables load no pandas or
matplotlib, and each command imports only its own module (``profan.cli.COMMANDS``).

Each case runs in a fresh interpreter and lists what it loaded (``sys.modules``), so the test
checks what was imported, not how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profan.cli import COMMANDS, build_parser, chosen_command

from .conftest import FIXTURES_DIR, REPO_ROOT

HEAVY = ("numpy", "pandas", "matplotlib", "lark", "google.protobuf")
# Modules of profan.commands that are no command: what several commands declare alike.
SHARED = ("profan.commands.arguments",)
MLP_HLO = FIXTURES_DIR / "mlp" / "hlo" / "module_0024.jit_train_step.cpu_after_optimizations.txt"


def _loaded(code: str, cache_dir: Path | None = None) -> dict[str, list[str]]:
    """Run ``code`` in a fresh interpreter (this checkout first on the path): the heavy
    libraries and the ``profan.commands`` modules it left in ``sys.modules``.  ``cache_dir``:
    profan's cache for the run (else the session's, which earlier tests may have filled)."""
    report = """
        import json, sys
        print("LOADED " + json.dumps({
            "heavy": sorted(m for m in HEAVY if m in sys.modules),
            "commands": sorted(
                m for m in sys.modules if m.startswith("profan.commands.") and m not in SHARED
            ),
        }))
    """
    program = (
        f"HEAVY = {HEAVY!r}\nSHARED = {SHARED!r}\n"
        + textwrap.dedent(code)
        + textwrap.dedent(report)
    )
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
    )
    if cache_dir is not None:
        env["PROFAN_CACHE_DIR"] = str(cache_dir)
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("LOADED "))
    return json.loads(line.removeprefix("LOADED "))


def _cli(*argv: str, cache_dir: Path | None = None) -> dict[str, list[str]]:
    return _loaded(
        f"""
        import contextlib, io
        from profan.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main({list(argv)!r})
            except SystemExit as exit:  # --help exits from argparse
                code = exit.code
        assert code == 0, code
        """,
        cache_dir,
    )


def test_import_profan_loads_no_library_and_no_command() -> None:
    loaded = _loaded("import profan")
    assert loaded == {"heavy": [], "commands": []}


def test_help_imports_no_command() -> None:
    loaded = _cli("--help")
    assert loaded == {"heavy": [], "commands": []}


def test_chips_loads_only_its_command() -> None:
    loaded = _cli("chips")
    assert loaded == {"heavy": [], "commands": ["profan.commands.chips"]}


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_hlo_summary_loads_no_pandas_or_matplotlib(json_flag: tuple[str, ...]) -> None:
    loaded = _cli("hlo", *json_flag, str(MLP_HLO))
    assert not {"pandas", "matplotlib"} & set(loaded["heavy"]), loaded
    assert loaded["commands"] == ["profan.commands.hlo"]


def test_hlo_roofline_loads_pandas_when_it_needs_it() -> None:
    """The control: ``--chip`` builds a table, so pandas is loaded then (the check above can
    fail)."""
    loaded = _cli("hlo", "--json", "--chip", "cpu", str(MLP_HLO))
    assert "pandas" in loaded["heavy"]
    assert "matplotlib" not in loaded["heavy"]


def test_json_report_loads_no_matplotlib(tmp_path: Path) -> None:
    argv = ("report", str(FIXTURES_DIR / "mlp"), "--format", "json", "--out", str(tmp_path))
    cold = _cli(*argv, cache_dir=tmp_path / "cache")  # an empty cache: the trace is read
    assert "matplotlib" not in cold["heavy"]
    assert "pandas" in cold["heavy"]
    assert cold["commands"] == ["profan.commands.report"]
    reopened = _cli(*argv, cache_dir=tmp_path / "cache")  # the same report again, from the cache
    assert not {"pandas", "matplotlib", "lark"} & set(reopened["heavy"]), reopened
    assert reopened["commands"] == ["profan.commands.report"]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_has_its_module_and_help(name: str, capsys) -> None:
    """Every ``COMMANDS`` entry names a module with ``add_arguments`` and ``run``; its own
    ``--help`` lists its arguments and the shared ones."""
    assert chosen_command(["--debug", name, "x"]) == name
    with pytest.raises(SystemExit) as exit:
        build_parser(name).parse_args([name, "--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert COMMANDS[name].help.split()[0] in out
    assert ("--kernels" in out) == COMMANDS[name].costs  # (cache has no chips to cost)
    assert ("--workers" in out) == COMMANDS[name].reads_traces


def test_top_level_help_lists_every_command(capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser(None).parse_args(["--help"])
    words = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    for name, command in COMMANDS.items():
        assert f"{name} {command.help}" in words
