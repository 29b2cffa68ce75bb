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
