"""Sweep speed (not a test): design points per second, engine alone and end to end.

    python benchmarks/bench_sweep.py [--points 1000 10000] [--jobs 1 2]

Engine alone: `estimate.record` on pre-built scenario values. End to end: `llmsim sweep` machinery
(expand from the spec, evaluate, rank, write CSV) on a grid of llama3-8b splits and batch sizes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

GRID = """\
base:
  model: llama3-8b
  system: {{accelerator: h100-sxm, num_devices: 1024, network: dgx-h100}}
  parallel: {{microbatch_size: 1, recompute: selective, zero_stage: 1}}
  workload: {{mode: training, precision: bf16, seq_len: 4096, global_batch_size: 4096}}
grid:
  parallel.tp: [1, 2, 4, 8]
  parallel.pp: [1, 2, 4, 8]
  parallel.recompute: [none, selective, full]
  workload.global_batch_size: {{from: 1024, to: {top}, step: 1024}}
objectives:
  - maximize: tokens_per_s
  - minimize: memory_per_device_gb
"""


def engine_alone(n: int) -> float:
    from llmsim.estimate import load, record
    from llmsim.spec.presets import PresetRegistry

    sc = load(None, PresetRegistry(), ["model=llama3-8b", "parallel.pp=1", "system.num_devices=64"])
    t = time.perf_counter()
    for _ in range(n):
        record(sc)
    return n / (time.perf_counter() - t)


def end_to_end(n: int, jobs: int) -> float:
    from llmsim import sweep as sw
    from llmsim.report import to_csv, write_atomic

    steps = max(1, n // 48)
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "s.yaml"
        spec_path.write_text(GRID.format(top=1024 * steps))
        t = time.perf_counter()
        spec = sw.load_sweep(spec_path)
        rows = sw.rank(sw.run(spec, (), jobs), spec.objectives)
        write_atomic(Path(tmp) / "out.csv", to_csv(rows, sw.columns(rows)))
        return spec.size / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    print(f"engine alone: {engine_alone(min(args.points)):,.0f} training points/s (1 core)")
    for n in args.points:
        for j in args.jobs:
            print(f"end to end, {n:,} points, {j} job(s): {end_to_end(n, j):,.0f} points/s")


if __name__ == "__main__":
    main()
