"""llmsim's sweep against Calculon's exhaustive search (``llm-optimal-execution``), GPT-3 175B on A100s
(not a test).

Calculon (github.com/calculon-ai/calculon) is installed in its own virtual environment, never imported
here: its search runs in that environment's Python, which this script starts and times.

    python3 -m venv /tmp/calc_venv && /tmp/calc_venv/bin/pip install psutil numpy CALCULON_CHECKOUT
    python benchmarks/vs_calculon.py --calculon-python /tmp/calc_venv/bin/python \\
        --calculon-dir CALCULON_CHECKOUT [--gpus 64] [--max-batch 64] [--full]

Side by side, per grid point and per configuration each side actually times (llmsim's split checks and
memory floor refuse most of its grid before the timing model; Calculon enumerates valid splits only):
both search GPT-3 175B (96 layers, 96 heads, sequence 2,048) on ``--gpus`` A100s with the
global batch the largest multiple of dp up to ``--max-batch``. Calculon enumerates its own space
(``OptimalExecution.run_command``'s loops, called from its package: tp, pp, interleaving, recompute,
optimizer sharding, tensor-parallel communication, then microbatch, overlaps and network per group),
restricted so that it finishes in minutes: no second memory tier (no offloading) and
``--tp-comm`` types. llmsim sweeps the knobs it has for the same space: tp and pp (every divisor), virtual
stages (every divisor of the layers), microbatch (every divisor of the batch), recompute (none, selective,
full), ZeRO 0/1 (optimizer sharding), sequence parallelism and TP overlap on or off, and the rank order
(which of the tp, dp and pp groups share a node: Calculon's choice of network per group); it has no
offloading, data-parallel overlap switch or Calculon's tensor-parallel communication variants. Each side reports points evaluated, CPU-seconds (the process and its workers) and
points per CPU-second. ``--full`` also runs llmsim over Calculon's full 1,536-GPU space
(``--pareto-only``), with wall time, CPU-seconds and peak RSS, against Calculon's rate on a sample of
that same space (``--calculon-full-stride``); Calculon's count of the space comes from its search in debug
mode (it loops without evaluating).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Calculon's search, run by its own interpreter: the enumeration of OptimalExecution.run_command, each
# (tp, pp, ...) tuple searched by OptimalExecution.search on a process pool; prints the counts as JSON
CALCULON = """
import json, multiprocessing as mp, sys
import calculon
from calculon.llm import Llm, OptimalExecution
from calculon.system import System
from calculon.util import pick
model, system, gpus, max_batch, cpus, debug, tp_comm, no_mem2, stride = json.loads(sys.argv[1])
app = Llm.Application(calculon.io.read_json_file(model))
cfg = calculon.io.read_json_file(system)
if no_mem2:
    cfg["mem2"]["GiB"] = 0
syst = System(cfg)
params = []
for tp in Llm.get_all_tensor_parallelisms(gpus, app.hidden, app.attn_heads):
    for pp in Llm.get_all_pipeline_parallelisms(gpus, tp, app.num_blocks):
        dp = Llm.get_data_parallelism(gpus, tp, pp)
        for ppint in Llm.get_valid_pipeline_interleavings(app.num_blocks, pp):
            batch = OptimalExecution.get_batch_size(dp, max_batch)
            if batch is None:
                continue
            for recompute in ["full", "attn_only", "none"]:
                for sharding in pick(dp > 1, [True, False], [False]):
                    for comm in tp_comm:
                        params.append((debug, 1, False, gpus, max_batch, "float16", app, syst, tp, pp, dp, ppint,
                                       batch, recompute, sharding, comm, [True], False, True, True))
with mp.Pool(cpus) as pool:
    out = pool.starmap(OptimalExecution.search, params[::stride], chunksize=1)
best = max((b[0][0] for b, *_ in out if b), default=None)
print(json.dumps({"points": sum(o[1] for o in out), "good": sum(o[2] for o in out), "best_sample_rate": best}))
"""

SWEEP = """\
# GPT-3 175B on {gpus:,} A100s, the knobs of Calculon's llm-optimal-execution that llmsim has
# (benchmarks/vs_calculon.py writes this file)
base:
  model: gpt3-175b
  system: {{accelerator: a100-sxm-80gb, num_devices: {gpus}, network: dgx-a100}}
  parallel: {{tp: 8, pp: 1, microbatch_size: 1, recompute: selective, zero_stage: 1}}
  workload: {{mode: training, precision: fp16, seq_len: 2048, global_batch_size: {batch}}}
grid:
  parallel.tp: auto
  parallel.pp: auto
  parallel.virtual_stages: [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96]
  parallel.microbatch_size: {microbatch}
  parallel.recompute: [none, selective, full]
  parallel.zero_stage: [0, 1]
  parallel.sequence_parallel: [false, true]
  parallel.tp_comm_overlap: [false, true]
  # which groups share a node (Calculon's network per group): the 6 orders of the tp, dp and pp blocks
  parallel.order: [[tp, cp, ep, dp, pp], [tp, cp, ep, pp, dp], [dp, tp, cp, ep, pp], [dp, pp, tp, cp, ep],
                   [pp, tp, cp, ep, dp], [pp, dp, tp, cp, ep]]
objectives:
  - maximize: tokens_per_s
"""


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def sweep_yaml(gpus: int, max_batch: int) -> str:
    # every dp divides gpus; the batch is the largest multiple of dp up to max_batch, the same for every
    # dp when gpus divides max_batch (64 and 64; 1,536 and 3,072)
    if max_batch % gpus:
        raise SystemExit(f"--max-batch must be a multiple of --gpus ({gpus})")
    return SWEEP.format(gpus=gpus, batch=max_batch, microbatch=divisors(max_batch))


def timed(cmd: list[str]) -> tuple[str, float, float, float]:
    """(stdout, wall s, CPU-s of the process and its children, peak RSS MB of its largest process)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"{cmd[:4]} failed with status {status}")
    return out, time.perf_counter() - t, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def calculon(py: str, src: Path, gpus: int, max_batch: int, cpus: int, debug: bool, tp_comm: list[str],
             no_mem2: bool, stride: int = 1) -> tuple[dict, float, float]:
    """Calculon's search over its space (every ``stride``-th (tp, pp, interleaving, recompute, sharding,
    tp comm) configuration; ``debug``: counted, not evaluated): (counts, wall s, CPU-s)."""
    args = [str(src / "models/gpt3-175B.json"), str(src / "systems/a100_80g.json"), gpus, max_batch, cpus, debug,
            tp_comm, no_mem2, stride]
    out, wall, cpu, _ = timed([py, "-c", CALCULON, json.dumps(args)])
    return json.loads(out.strip().splitlines()[-1]), wall, cpu


def llmsim(gpus: int, max_batch: int, jobs: int, tmp: str, flags: tuple[str, ...] = ()) -> tuple[int, int, float, float, float]:
    """(points, rows written, wall s, CPU-s, peak RSS MB) of ``llmsim sweep`` over the mapped space."""
    from bench_sweep import run_sweep  # benchmarks/ is on sys.path (main)

    from llmsim.spec.sweep import load_sweep

    path = Path(tmp) / f"calculon-{gpus}.yaml"
    path.write_text(sweep_yaml(gpus, max_batch))
    out = Path(tmp) / "out.csv"
    wall, cpu, _, tree = run_sweep(str(path), jobs, str(out), flags)
    rows = sum(1 for _ in out.open()) - 1
    return load_sweep(path).size, rows, wall, cpu, tree


def timed_configurations(gpus: int, max_batch: int, tmp: str) -> int:
    """How many of llmsim's points reach the timing model (``training_columns``): a valid split that the
    memory floor does not rule out untimed; the rest are refused by the split checks (dp not integral, heads
    not divisible by tp, ...) or by the weights and optimizer states alone, as Calculon never counts an
    invalid split. Counted in this process by wrapping ``modes.training.training_record``."""
    import numpy as np

    from llmsim.spec.sweep import load_sweep
    from llmsim.study.modes import training as mode_training
    from llmsim.study.sweep import run

    path = Path(tmp) / f"calculon-{gpus}-count.yaml"
    path.write_text(sweep_yaml(gpus, max_batch))
    count, real = [0], mode_training.training_record

    def counting(sc, split, num_devices, global_batch_size):
        count[0] += len(np.atleast_1d(split.tp))
        return real(sc, split, num_devices, global_batch_size)

    mode_training.training_record = counting
    try:
        run(load_sweep(path), (), 1, front_only=True)  # which points are timed does not depend on what is kept
    finally:
        mode_training.training_record = real
    return count[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calculon-python", required=True, help="the Python of the environment Calculon is installed in")
    ap.add_argument("--calculon-dir", required=True, type=Path, help="a Calculon checkout (models/, systems/)")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--tp-comm", nargs="+", default=["ar", "rs_ag"], help="Calculon's tensor_par_comm_type values")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--calculon-stride", type=int, default=32,
                    help="Calculon evaluates every Nth of its outer configurations (its rate; it would take hours)")
    ap.add_argument("--full", action="store_true", help="also llmsim over Calculon's 1,536-GPU space, batch 3,072")
    ap.add_argument("--calculon-full-stride", type=int, default=4096,
                    help="with --full: Calculon evaluates every Nth configuration of the 1,536-GPU space (its rate there)")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    space, _, _ = calculon(args.calculon_python, args.calculon_dir, args.gpus, args.max_batch, args.jobs, True,
                           args.tp_comm, True)
    res, c_wall, c_cpu = calculon(args.calculon_python, args.calculon_dir, args.gpus, args.max_batch, args.jobs,
                                  False, args.tp_comm, True, args.calculon_stride)
    c_rate = res["points"] / c_cpu
    print(f"Calculon llm-optimal-execution, GPT-3 175B, {args.gpus} A100 GPUs, max batch {args.max_batch}, no offload "
          f"tier, tp comm {'/'.join(args.tp_comm)}: a space of {space['points']:,} executions; every "
          f"{args.calculon_stride}th configuration on {args.jobs} processes: {res['points']:,} executions "
          f"({res['good']:,} run), {c_wall:.1f} s, {c_cpu:.1f} CPU-s, {c_rate:,.1f} executions per CPU-second "
          f"(the whole space: about {space['points'] / c_rate:,.0f} CPU-s)")
    with tempfile.TemporaryDirectory() as tmp:
        points, rows, wall, cpu, tree = llmsim(args.gpus, args.max_batch, 1, tmp)  # workers' start-up: CPU-s
        rate = points / cpu
        print(f"llmsim sweep, the same model, GPUs and batch, 1 process: {points:,} points ({rows:,} feasible rows), {wall:.1f} s, "
              f"{cpu:.1f} CPU-s, {rate:,.0f} points per CPU-second, peak RSS {tree:,.0f} MB")
        timed_points = timed_configurations(args.gpus, args.max_batch, tmp)
        print(f"ratio (points per CPU-second, llmsim / Calculon): {rate / c_rate:,.0f}x per grid point; "
              f"{timed_points:,} of llmsim's points ({100 * timed_points / points:.1f}%) reach the timing model "
              f"(Calculon counts valid configurations only): {timed_points / cpu / c_rate:,.0f}x per timed "
              f"configuration")
        if args.full:
            full, _, _ = calculon(args.calculon_python, args.calculon_dir, 1536, 3072, args.jobs, True,
                                  ["ar", "p2p_rs_ag", "rs_ag"], False)
            comm = ["ar", "p2p_rs_ag", "rs_ag"]
            res_full, _, f_cpu = calculon(args.calculon_python, args.calculon_dir, 1536, 3072, args.jobs, False,
                                               comm, False, args.calculon_full_stride)
            f_rate = res_full["points"] / f_cpu
            print(f"Calculon's full space (1,536 GPUs, max batch 3,072, as shipped: offload tier, all tp comm "
                  f"types): {full['points']:,} executions; every {args.calculon_full_stride}th configuration: "
                  f"{res_full['points']:,} executions, {f_cpu:.1f} CPU-s, {f_rate:,.1f} per CPU-second (the "
                  f"whole space about {full['points'] / f_rate / 3600:,.0f} CPU-hours)")
            points, rows, wall, cpu, tree = llmsim(1536, 3072, args.jobs, tmp, ("--pareto-only",))
            timed_points = timed_configurations(1536, 3072, tmp)
            print(f"llmsim sweep over it, --pareto-only: {points:,} points ({rows:,} rows), {wall:.1f} s, {cpu:.1f} "
                  f"CPU-s, {points / cpu:,.0f} points per CPU-second, peak RSS {tree:,.0f} MB (command and workers); "
                  f"{points / cpu / f_rate:,.0f}x Calculon's rate on the same space per grid point, "
                  f"{timed_points / cpu / f_rate:,.0f}x per timed configuration ({timed_points:,} timed)")


if __name__ == "__main__":
    main()
