"""No committed fixture carries the absolute path of the machine that made it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import FIXTURES_DIR

# A directory path ending in the repository's fixtures/ folder and a generator script.
ABSOLUTE_SCRIPT = re.compile(rb"/(?:[\w.\-]+/)+fixtures/(?:make_\w+|generators/\w+)\.py")
MACHINE_ROOTS = re.compile(rb"(?<![\w.])/(?:work|home|root|tmp|Users)/[\w.\-]+/")


def _fixture_files() -> list[Path]:
    # Not the generators' own files, nor what running them leaves (__pycache__, tool caches).
    return [
        path
        for path in sorted(FIXTURES_DIR.rglob("*"))
        if path.is_file()
        and path.suffix not in (".py", ".md")
        and not any(
            part.startswith(".") or part == "__pycache__"
            for part in path.relative_to(FIXTURES_DIR).parts
        )
    ]


def test_fixture_files_hold_no_absolute_script_path() -> None:
    files = _fixture_files()
    assert len(files) > 50  # the dumps, traces and meta files are all there
    offenders = [
        str(p.relative_to(FIXTURES_DIR)) for p in files if ABSOLUTE_SCRIPT.search(p.read_bytes())
    ]
    assert offenders == []


def test_fixture_text_holds_no_machine_directory() -> None:
    offenders = []
    for path in _fixture_files():
        if path.suffix in (".txt", ".json"):
            found = MACHINE_ROOTS.search(path.read_bytes())
            if found:
                offenders.append(f"{path.relative_to(FIXTURES_DIR)}: {found.group(0)!r}")
    assert offenders == []


def test_source_lines_still_name_the_generator() -> None:
    # The rewrite kept the file name: stack frames now name the script relative to the repo.
    dump = next((FIXTURES_DIR / "matmul" / "hlo").glob("*after_optimizations.txt"))
    assert '"fixtures/make_fixtures.py"' in dump.read_text()
