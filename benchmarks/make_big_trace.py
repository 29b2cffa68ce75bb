"""Make a large real CPU trace (>= 50 MB xplane) for the loader and report benchmarks.

    python benchmarks/make_big_trace.py [--steps 250] [--out benchmarks/_data/big]

Runs the fixture transformer training step (fixtures/generators/transformer.py, 8 virtual CPU
devices, 4x2 data x model mesh) for --steps steps under jax.profiler.trace, each step inside a
StepTraceAnnotation. Writes ``<out>/trace/plugins/profile/<run>/<host>.xplane.pb`` (as the
profiler wrote it), ``<out>/hlo/`` (the main module's after-optimizations dump, for ``--hlo``)
and ``<out>/meta.json``. ``benchmarks/_data/`` is git-ignored: never commit the output.
Needs jax; takes about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "_data" / "big"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    dump = out / "_dump"
    # Must be set before jax is imported.
    os.environ["XLA_FLAGS"] = (
        f"--xla_force_host_platform_device_count=8 --xla_dump_to={dump} --xla_dump_hlo_as_text"
    )
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, str(REPO / "fixtures"))
    import jax
    from generators.transformer import build_transformer

    program = build_transformer()
    fn, state = program["fn"], program["args"]
    compiled = fn.lower(*state).compile()
    module_name = compiled.as_text().split(None, 2)[1].rstrip(",")
    for _ in range(2):  # warm-up outside the trace
        result = fn(*state)
        jax.block_until_ready(result)
        state = program["advance"](state, result)

    started = time.perf_counter()
    with jax.profiler.trace(str(out / "trace")):
        for i in range(args.steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                result = fn(*state)
                jax.block_until_ready(result)
            state = program["advance"](state, result)
    traced_s = time.perf_counter() - started

    (out / "hlo").mkdir()
    for path in glob.glob(str(dump / f"module_*.{module_name}.*after_optimizations.txt")):
        if path.endswith("after_optimizations.txt"):
            shutil.copy2(path, out / "hlo")
    shutil.rmtree(dump)
    (xplane,) = (out / "trace").rglob("*.xplane.pb")
    meta = {
        "program": "fixtures transformer training step (see fixtures/README.md)",
        "module_name": module_name,
        "steps": args.steps,
        "step_trace_annotation": True,
        "device_count": jax.device_count(),
        "jax_version": jax.__version__,
        "xplane": str(xplane.relative_to(out)),
        "xplane_bytes": xplane.stat().st_size,
        "traced_seconds": round(traced_s, 3),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
