"""What profan.capture costs on top of running the steps: a sharded MLP training step on 8
virtual CPU devices, timed as a plain loop and under capture (profile + analysis).

Run:  python benchmarks/capture_overhead.py [--steps 3] [--layers 4] [--repeat 3]
(needs the [jax] extra; sets XLA_FLAGS for 8 CPU devices itself). Prints seconds per phase and
the ratio of capture's wall time to the plain loop's. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from typing import Any

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def build(layers: int, width: int, batch: int) -> tuple[Any, tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))

    def put(value: Any, *spec: str | None) -> Any:
        return jax.device_put(value, NamedSharding(mesh, P(*spec)))

    def loss(params: list[tuple[Any, Any]], x: Any) -> Any:
        for w_in, w_out in params:
            x = x + jax.nn.gelu(x @ w_in) @ w_out
        return jnp.mean(x**2)

    @jax.jit
    def step(params: list[tuple[Any, Any]], x: Any) -> tuple[Any, Any]:
        value, grads = jax.value_and_grad(loss)(params, x)
        return [
            (a - 1e-3 * ga, b - 1e-3 * gb) for (a, b), (ga, gb) in zip(params, grads, strict=True)
        ], value

    key = jax.random.key(0)
    params = [
        (
            put(jax.random.normal(key, (width, 4 * width)) * 0.02, None, "model"),
            put(jax.random.normal(key, (4 * width, width)) * 0.02, "model", None),
        )
        for _ in range(layers)
    ]
    x = put(jax.random.normal(key, (batch, width)), "data", None)
    return step, (params, x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import jax

    from profan.capture import Capture
    from profan.report.analysis.pipeline import report_for

    step, arguments = build(args.layers, args.width, args.batch)
    jax.block_until_ready(step(*arguments))  # compile once for every timing below

    plain, captured, analysis, ops = [], [], [], 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        for _ in range(1 + args.steps):  # the same work as capture: 1 warm-up + steps
            jax.block_until_ready(step(*arguments))
        plain.append(time.perf_counter() - started)

        started = time.perf_counter()
        with Capture(steps=args.steps, warmup=1, keep_trace=True) as run:
            for _ in range(1 + args.steps):
                with run.step(wait=()):
                    run.block(step(*arguments))
        captured.append(time.perf_counter() - started)
        assert run.report is not None
        folder = run.report.trace.path
        ops = len(run.report.ops)
        started = time.perf_counter()  # the analysis alone, on the kept trace
        report_for(folder, run=run.report.trace.run)
        analysis.append(time.perf_counter() - started)
        size = sum(
            os.path.getsize(os.path.join(root, name))
            for root, _, names in os.walk(folder)
            for name in names
        )
        shutil.rmtree(folder)

    def show(name: str, values: list[float]) -> None:
        print(f"{name:34s} median {statistics.median(values):7.3f} s  (min {min(values):.3f})")

    print(
        f"program: {args.layers}-layer MLP train step, width {args.width}, batch {args.batch}, "
        f"4x2 mesh; {args.steps} traced steps + 1 warm-up; {ops} ops; trace {size / 1e6:.2f} MB"
    )
    show("plain loop (1 + steps)", plain)
    show("profan.capture (profile + analyse)", captured)
    show("  of which the analysis (report_for)", analysis)
    ratio = statistics.median(captured) / statistics.median(plain)
    print(
        f"capture / plain loop: {ratio:.1f}x; capture - plain: "
        f"{statistics.median(captured) - statistics.median(plain):.3f} s"
    )


if __name__ == "__main__":
    main()
