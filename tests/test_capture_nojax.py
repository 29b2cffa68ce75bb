"""profan.capture without JAX: a clear error saying what to install; profan imports without it."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> subprocess.CompletedProcess[str]:
    # jax made unimportable in a fresh interpreter, whether or not it is installed here
    prelude = "import sys\nsys.modules['jax'] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_capture_without_jax_says_how_to_install_it() -> None:
    result = _run(
        """
        from profan.capture import CaptureError, capture
        try:
            capture(print, 1)
        except CaptureError as error:
            print("ERROR", error.exit_code, error)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "ERROR 2 profan.capture needs JAX: pip install 'profan[jax]'" in result.stdout


def test_capture_module_imports_light() -> None:
    """``profan.capture`` is imported by ``import profan``: it must not pull in jax or pandas."""
    result = _run(
        """
        import sys
        import profan.capture
        heavy = sorted(m for m in ("pandas", "numpy", "jax", "profan.report.model")
                       if sys.modules.get(m) is not None)
        print("HEAVY", heavy)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


def test_profan_capture_is_the_function_at_the_top_level() -> None:
    """``profan.capture(fn, *args)`` as the issue and README spell it, without a second import;
    ``from profan.capture import ...`` still reaches the module's other names."""
    result = _run(
        """
        import profan
        from profan.capture import CaptureError, program_meshes
        print("TOP", profan.capture.__module__, profan.capture.__name__, profan.Capture.__name__)
        try:
            profan.capture(print, 1)
        except CaptureError as error:
            print("ERROR", error.exit_code)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "TOP profan.capture capture Capture" in result.stdout
    assert "ERROR 2" in result.stdout
