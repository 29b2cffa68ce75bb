"""The test suite's own rules, read from its source: where the corpus and the fixtures are is
said once, in conftest.py, and every test reaches them through its fixtures and names."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
RULES = {"conftest.py", Path(__file__).name}


def _test_files() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(TESTS.glob("*.py")):
        if path.name not in RULES:
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _script_blocks(tree: ast.Module) -> set[int]:
    """The nodes under ``if __name__ == "__main__":``: a script's, never a test's."""
    found: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            found |= {id(inner) for inner in ast.walk(node)}
    return found


def _is_path_part(node: ast.AST, parts: tuple[str, ...]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in parts


def test_only_conftest_says_where_the_corpus_is() -> None:
    """A test reads ../shared/corpus only through the ``corpus_dir`` fixture (or conftest's
    helpers built on it), so that it is marked ``corpus`` and ``-m "not corpus"`` runs exactly the
    tests that need nothing outside the repository."""
    found = []
    for path, tree in _test_files():
        docstrings, script = _docstrings(tree), _script_blocks(tree)
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if id(node) in script:
                continue
            if isinstance(node, ast.Name) and node.id == "CORPUS_DIR":
                found.append(f"{where} CORPUS_DIR")
            elif isinstance(node, ast.alias) and node.name == "CORPUS_DIR":
                found.append(f"{where} imports CORPUS_DIR")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                if _is_path_part(node.right, ("shared", "corpus")):
                    found.append(f"{where} {ast.unparse(node)}")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "shared/corpus" in node.value
                and id(node) not in docstrings
            ):
                found.append(f"{where} {node.value!r}")
    assert not found, "the corpus path outside conftest.py (use corpus_dir):\n" + "\n".join(found)


ENVIRON_WRITES = {"update", "clear", "pop", "popitem", "setdefault", "__setitem__", "__delitem__"}


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def test_the_environment_is_changed_only_through_monkeypatch() -> None:
    """A test or fixture that sets an environment variable does it with ``monkeypatch`` (or
    ``pytest.MonkeyPatch``), which puts it back: never by writing ``os.environ`` itself, which
    leaks into every later test of the session when nothing restores it."""
    found = []
    for path, tree in _test_files():
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
                targets = (
                    node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
                )
            if any(isinstance(t, ast.Subscript) and _is_environ(t.value) for t in targets):
                found.append(f"{where} {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                func = node.func
                if (func.attr in ENVIRON_WRITES and _is_environ(func.value)) or (
                    func.attr in ("putenv", "unsetenv") and ast.unparse(func.value) == "os"
                ):
                    found.append(f"{where} {ast.unparse(node)}")
    assert not found, "os.environ written directly (use monkeypatch):\n" + "\n".join(found)


def _is_test_fixture(function: ast.FunctionDef) -> bool:
    """A fixture of each test's own (no wider scope: a module's shared cache is another thing)."""
    return any(
        "fixture" in ast.unparse(decorator) and "scope=" not in ast.unparse(decorator)
        for decorator in function.decorator_list
    )


def test_one_private_cache_fixture() -> None:
    """A test that wants a cache directory of its own asks conftest's ``private_cache``: no
    module keeps a copy of a fixture that points ``PROFAN_CACHE_DIR`` at a new directory."""
    found = []
    for path, tree in _test_files():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and _is_test_fixture(node):
                text = ast.unparse(node)
                if "setenv" in text and "PROFAN_CACHE_DIR" in text:
                    found.append(f"{path.name}:{node.lineno} {node.name}")
    assert not found, "a copy of conftest's private_cache fixture:\n" + "\n".join(found)


def _is_file_path(node: ast.AST) -> bool:
    """``Path(__file__)`` and what is made of it (``.resolve()``, ``.parent``, ``.parents[1]``)."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id == "__file__"


def test_the_fixtures_and_the_repository_are_found_through_conftest() -> None:
    """conftest.py says where the repository and its fixtures are (REPO_ROOT, FIXTURES_DIR and
    the fixtures of those names): no module works it out again from its own ``__file__``, nor
    joins ``"fixtures"`` onto a root of its own."""
    found = []
    for path, tree in _test_files():
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Attribute) and node.attr in ("parent", "parents"):
                text = ast.unparse(node)  # the tests' folder is one .parent up: the root, two
                if _is_file_path(node) and (text.count(".parent") >= 2 or ".parents" in text):
                    found.append(f"{where} {text}")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                right = node.right
                if _is_path_part(right, ("fixtures",)) or (
                    isinstance(right, ast.Constant)
                    and isinstance(right.value, str)
                    and right.value.startswith("fixtures/")
                ):
                    found.append(f"{where} {ast.unparse(node)}")
    found = sorted(set(found))
    assert not found, "a path conftest.py already names (use it):\n" + "\n".join(found)
