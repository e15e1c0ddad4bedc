"""Sweep speed (not a test): design points per second, engine alone and end to end.

    python benchmarks/bench_sweep.py [--points 10000 100000 1000000] [--jobs 1 2]
    python benchmarks/bench_sweep.py --grid benchmarks/grids/realistic.yaml benchmarks/grids/realistic-1m.yaml
    python benchmarks/bench_sweep.py --grid benchmarks/grids/ten-million.yaml --jobs 2 [--pareto-only]

Engine alone: one worker's tasks evaluated in this process, per CPU-second (points decoded from their indices, grouped,
split checks, engine, cost columns; `study.evaluate.evaluate_chunk`), and, for contrast, `study.records.record`
point by point; for training (the grid below) and for inference (Llama 3 70B serving on 8 devices of 4
accelerator generations, tp 1/2/4/8, every batch size from 1 up). End to end: the `llmsim sweep` command
(expand from the spec, evaluate on ``jobs`` processes, rank by Pareto front, write the CSV atomically) on
a grid of llama3-8b splits, microbatch sizes, recompute modes and batch sizes (or the ``--grid`` files),
with its wall time, CPU-seconds (the command and its workers), rows written and peak memory (of the largest
process, and of the command and its workers together).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
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
  parallel.microbatch_size: [1, 2, 4]
  parallel.recompute: [none, selective, full]
  workload.global_batch_size: {{from: 1024, to: {top}, step: 1024}}
objectives:
  - maximize: tokens_per_s
  - minimize: memory_per_device_gb
"""


POINTS_PER_STEP = 4 * 4 * 3 * 3  # tp x pp x microbatch x recompute

INFERENCE_GRID = """\
base:
  model: llama3-70b
  system: {{accelerator: h100-sxm, num_devices: 8, network: dgx-h100}}
  parallel: {{tp: 8, pp: 1}}
  workload: {{mode: inference, precision: fp8, batch_size: 1, input_len: 2048, output_len: 512}}
zip:
  system.accelerator: [a100-sxm-80gb, h100-sxm, h200-sxm, b200]
  system.network: [dgx-a100, dgx-h100, dgx-h200, dgx-b200]
  workload.precision: [bf16, fp8, fp8, fp4]
grid:
  parallel.tp: [1, 2, 4, 8]
  workload.batch_size: {{from: 1, to: {top}, step: 1}}
objectives:
  - minimize: tpot_s
  - minimize: cost_per_million_tokens_usd
"""


def _spec(tmp: str, n: int, mode: str = "training"):
    from llmsim.spec.sweep import load_sweep

    path = Path(tmp) / "s.yaml"
    if mode == "training":
        path.write_text(GRID.format(top=1024 * max(1, n // POINTS_PER_STEP)))
    else:
        path.write_text(INFERENCE_GRID.format(top=max(1, n // 16)))  # 4 accelerators x 4 tp
    return load_sweep(path)


def engine_alone(n: int, mode: str = "training", passes: int = 3) -> float:
    """What one worker does: the sweep's tasks evaluated one after the other in this process (points per
    CPU-second of this process, the fastest of ``passes`` passes: a shared machine's CPU-seconds vary by
    a fifth from run to run)."""
    from llmsim.study.evaluate import evaluate_chunk
    from llmsim.study.sweep import tasks

    with tempfile.TemporaryDirectory() as tmp:
        spec = _spec(tmp, n, mode)
        evaluate_chunk(spec, (), 0, 1)  # presets parsed once per worker
        best = float("inf")
        for _ in range(passes):
            t = time.process_time()
            for a, b in tasks(spec):
                evaluate_chunk(spec, (), a, b)
            best = min(best, time.process_time() - t)
        return spec.size / best


def point_by_point(n: int, mode: str = "training") -> float:
    from llmsim.spec.presets import PresetRegistry
    from llmsim.study.records import load, record

    flags = ["model=llama3-8b", "parallel.pp=1", "system.num_devices=64"] if mode == "training" else [
        "model=llama3-70b", "system.num_devices=8", "parallel.tp=8", "parallel.pp=1", "workload.mode=inference",
        "workload.precision=fp8", "workload.batch_size=64", "workload.input_len=2048", "workload.output_len=512"]
    sc = load(None, PresetRegistry(), flags)
    t = time.perf_counter()
    for _ in range(n):
        record(sc)
    return n / (time.perf_counter() - t)


def _tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants now (0 once it has gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_sweep(path: str, jobs: int, out: str, flags: tuple[str, ...] = ()) -> tuple[float, float, float, float]:
    """``llmsim sweep PATH --jobs J -o OUT`` as a user runs it: (wall seconds, CPU-seconds of the command
    and its workers, peak RSS in MB of the largest llmsim process, peak RSS in MB of the command and its
    workers together, sampled every 0.1 s with psutil; NaN without psutil)."""
    import threading

    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "llmsim", "sweep", path, "--quiet", "--jobs", str(jobs), "--yes",
                             *flags, "-o", out], stderr=subprocess.DEVNULL)
    peak = [float("nan")]
    done = threading.Event()

    def sample():
        try:
            import psutil  # noqa: F401
        except ImportError:
            return
        peak[0] = 0.0
        while not done.wait(0.1):
            peak[0] = max(peak[0], _tree_rss(proc.pid) / 2**20)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)  # the workers are the command's children: counted in its usage
    done.set()
    sampler.join()
    if status:
        raise SystemExit(f"llmsim sweep failed with status {status}")
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, peak[0]  # KiB on Linux


def end_to_end(n: int, jobs: int) -> tuple[int, float, float, float]:
    """(points, seconds, CPU-seconds, peak RSS in MB) of the homogeneous grid of ``n`` points to CSV."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = _spec(tmp, n)
        return (spec.size, *run_sweep(str(Path(tmp) / "s.yaml"), jobs, str(Path(tmp) / "out.csv"))[:3])


def grid(path: str, jobs: int, flags: tuple[str, ...] = ()) -> None:
    """A sweep file (e.g. benchmarks/grids/realistic.yaml) end to end to CSV (``flags``: e.g. --pareto-only);
    the CSV is written beside the working directory's temporary files (TMPDIR) and deleted."""
    from llmsim.spec.sweep import load_sweep

    size = load_sweep(path).size
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.csv"
        secs, cpu, mb, tree = run_sweep(path, jobs, str(out), flags)
        with out.open("rb") as fh:
            rows = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b"")) - 1
    print(f"{path} {' '.join(flags)}: {size:,} points, {rows:,} rows, {jobs} job(s): {secs:.1f} s, {cpu:.1f} CPU-s, "
          f"{size / cpu:,.0f} points per CPU-second, peak RSS {mb:,.0f} MB (largest process), {tree:,.0f} MB "
          "(command and workers together)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--grid", nargs="+", default=[], help="sweep files to run end to end instead")
    ap.add_argument("--pareto-only", action="store_true", help="with --grid: llmsim sweep --pareto-only")
    args = ap.parse_args()
    if args.grid:
        for path in args.grid:
            for j in args.jobs:
                grid(path, j, ("--pareto-only",) if args.pareto_only else ())
        return
    for mode in ("training", "inference"):
        print(f"point by point (estimate.record): {point_by_point(500, mode):,.0f} {mode} points/s (1 core)")
        for n in args.points:
            print(f"engine alone, {n:,} points: {engine_alone(n, mode):,.0f} {mode} points per CPU-second")
    for n in args.points:
        for j in args.jobs:
            size, secs, cpu, mb = end_to_end(n, j)
            print(f"end to end, {size:,} points, {j} job(s): {secs:.1f} s, {size / secs:,.0f} points/s, "
                  f"{size / cpu:,.0f} points per CPU-second, peak RSS {mb:,.0f} MB")


if __name__ == "__main__":
    main()
