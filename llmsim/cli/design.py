"""Design-space commands: sweep, search, cost (registered on the app in cli/app.py)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import typer

from llmsim.atomic import WriteError
from llmsim.cli.common import (
    SCENARIO,
    SET,
    Format,
    preset_dirs,
    registry,
    with_flags,
    workers,
)
from llmsim.spec.errors import SpecError


def sweep_cmd(
    ctx: typer.Context,
    spec: Path = typer.Argument(..., help="Sweep spec YAML (base, grid, zip, constraints, objectives, keep)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to FILE (.csv, .json, .jsonl: one JSON object a line, or .parquet), atomically."),
    jobs: int = typer.Option(-1, "--jobs", help="Processes evaluating points, this one and N-1 workers (-1: all "
                             "cores; with --backend dask: the cluster's workers)."),
    top: int | None = typer.Option(None, "--top", min=1, help="Keep the best K rows."),
    pareto_only: bool = typer.Option(False, "--pareto-only", help="Keep only the Pareto-optimal rows (rank 0)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    yes: bool = typer.Option(False, "--yes", help="Run sweeps of 10 million points or more."),
    backend: str = typer.Option("local", "--backend", help="local (joblib processes) or dask."),
    scheduler: str | None = typer.Option(None, "--scheduler", envvar="LLMSIM_DASK_SCHEDULER",
                                         help="Dask scheduler address (tcp://HOST:PORT); none: a local cluster."),
) -> None:
    """Evaluate a grid of design points and rank them by Pareto front; CSV on stdout or -o FILE."""
    import tempfile

    from llmsim.spec.sweep import load_sweep
    from llmsim.study import sweep as sw

    if backend not in ("local", "dask"):
        raise SpecError(f"--backend: unknown {backend!r}; allowed: local, dask")
    jobs = workers(jobs, "sweep", backend == "dask")
    sp = load_sweep(spec)
    sw.check_columns(sp)
    n = sp.size
    sys.stderr.write(f"llmsim sweep: {n:,} design points\n")
    if n >= 10_000_000 and not yes:
        raise SpecError(f"{n:,} design points: pass --yes to run a sweep of 10 million points or more",
                        file=str(spec))
    if output is not None and output.suffix not in (".csv", ".json", ".jsonl", ".parquet"):
        raise SpecError(f"-o {output}: unknown format {output.suffix!r}; allowed: .csv, .json, .jsonl, .parquet")
    if output is not None and not output.resolve().parent.is_dir():
        raise SpecError(f"-o {output}: directory {output.resolve().parent} does not exist")
    dirs = preset_dirs(ctx)
    fmt = output.suffix[1:] if output is not None else "csv"
    remote = backend == "dask"
    jobs = jobs if remote else sw.jobs_for(n, jobs)  # a small sweep: no worker start-up
    # rows wait in part files beside the output (or in TMPDIR for stdout) until they are ranked and merged
    try:
        parts_dir = tempfile.TemporaryDirectory(prefix=".llmsim-sweep-", dir=output.parent if output else None)
    except OSError as err:
        raise SpecError(f"-o {output or '-'}: cannot create a working directory for the sweep ({err.strerror})") from None
    try:
        with parts_dir as tmp, _progress(not quiet and sys.stderr.isatty()) as bar:
            plan = _run(sp, dirs, tmp, jobs, pareto_only, top, remote, scheduler, fmt, output, bar)
    except (BrokenPipeError, WriteError):
        raise
    except OSError as err:  # a part file on a full disk (in a worker or here)
        raise SpecError(f"-o {output or '-'}: cannot write the sweep's working files in "
                        f"{output.resolve().parent if output else tempfile.gettempdir()}: "
                        f"{err.strerror or err}") from None
    if output is not None:
        sys.stderr.write(f"llmsim sweep: {plan.rows:,} rows written to {output}\n")
    if not plan.rows:
        sys.stderr.write(f"llmsim sweep: no design point of {spec} is feasible; add 'keep: all' to the spec to see "
                         "each point's infeasible_reason\n")
    elif plan.rows < n and sp.keep != "all" and not pareto_only and (top is None or plan.rows < top):
        sys.stderr.write(f"llmsim sweep: {n - plan.rows:,} of {n:,} design points infeasible and left out; 'keep: "
                         "all' keeps them with their infeasible_reason\n")


def _run(sp, dirs, tmp, jobs, pareto_only, top, remote, scheduler, fmt, output, bar):
    """Evaluate, rank and write a sweep (its part files in ``tmp``); the plan of what was written."""
    from contextlib import nullcontext

    from llmsim.output import sweep_writer as out
    from llmsim.output.writers import write_atomic_parts, write_parquet
    from llmsim.study import stream as ss
    from llmsim.study import sweep as sw

    if remote:
        from llmsim.study.dask_backend import on_dask
    with on_dask(scheduler) if remote else nullcontext():
        keys = ss.evaluate(sp, dirs, tmp, jobs, pareto_only, bar("evaluating", len(sw.tasks(sp))), remote)
    plan = ss.plan(sp, keys, pareto_only, top)
    del keys  # the plan holds 4 bytes a written row (its position) and 2 (its group): the keys go
    if fmt == "parquet":
        write_parquet(output, out.collect(plan))
    elif fmt == "csv" and output is not None and out.write_csv(plan, output):
        pass  # in one pass: the rows fit in memory
    else:
        pieces = out.text(plan, fmt, tmp, jobs, bar("writing", len(plan.groups)))
        if output is None:
            for piece in pieces:
                sys.stdout.write(piece)
        else:
            write_atomic_parts(output, pieces)
    return plan


@contextmanager
def _progress(show: bool):
    """``bar(label, total)``: a callable that advances a rich progress task on stderr (or does nothing)."""
    if not show:
        yield lambda label, total: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        def task(label, total):
            t = bar.add_task(label, total=total)
            return lambda: bar.advance(t)

        yield task


def _search(
    ctx: typer.Context,
    scenario: Path | None = SCENARIO,
    flags: dict | None = None,
    set_: list[str] = SET,
    objective: str | None = typer.Option(None, "--objective", help="Output column to rank by (default: tokens_per_s "
                                         "for training; serving with an SLO: slo_cost_per_million_tokens_usd, "
                                         "smallest first; otherwise throughput_tokens_per_s_per_device)."),
    minimize: bool = typer.Option(False, "--minimize", help="Smaller is better (e.g. cost_per_million_tokens_usd)."),
    top: int = typer.Option(10, "--top", min=1, help="How many splits to show."),
    jobs: int = typer.Option(-1, "--jobs", help="Worker processes (-1: all cores)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json."),
) -> None:
    """Search every feasible split and show the best: training (tp, pp, ep, cp, microbatch, recompute, ZeRO) or
    serving (tp, pp, ep; replicas fill the devices; with an SLO, ranked by cost per million tokens at it)."""
    from llmsim.output.writers import emit, frame_records
    from llmsim.study import records as est
    from llmsim.study import search as se
    from llmsim.study import sweep as sw

    jobs = workers(jobs, "search")
    overrides = est.overrides_from_flags(flags, set_)
    reg = registry(ctx)
    sc = est.load(scenario, reg, overrides)
    base = se.base_of(scenario, est.DEFAULT_SCENARIO, overrides, reg)
    if objective is None:
        objective, maximize = se.default_objective(sc)
        maximize = maximize and not minimize
    else:
        maximize = not minimize
    spec = se.search_spec(base, str(scenario or est.DEFAULT_SCENARIO), sc, objective, maximize)
    sw.check_columns(spec)
    sys.stderr.write(f"llmsim search: {spec.size:,} splits\n")
    dirs = preset_dirs(ctx)
    frame = sw.rank(sw.run(spec, dirs, jobs), spec.objectives).iloc[:top]
    rows = frame_records(frame, sw.columns(frame)) if len(frame) else []
    if not rows:
        raise SpecError("no split fits in memory; add devices or lower the batch", file=str(scenario or
                                                                                           est.DEFAULT_SCENARIO))
    if fmt is not Format.table:
        emit(rows, fmt.value, sw.columns(frame))
        return
    cols = list(dict.fromkeys([*se.shown(sc), objective]))
    emit(rows, "table", cols, title=f"Best {len(rows)} splits of {rows[0]['model']} on {rows[0]['num_devices']} x "
         f"{rows[0]['accelerator']} by {objective}", headers={"microbatch_size": "mb", "zero_stage": "ZeRO",
                                                             "memory_per_device_gb": "mem GB", **se.HEADERS})


def cost_cmd(
    ctx: typer.Context,
    accelerator: str = typer.Argument(..., help="Accelerator preset name, e.g. h100-sxm."),
    yield_model: str = typer.Option("negative-binomial", "--yield-model",
                                    help="poisson, murphy, seeds, moore or negative-binomial (alpha 10)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv (header + one row) or json."),
    volume: float | None = typer.Option(None, "--volume", min=1,
                                        help="Units made: adds design and mask NRE shared over them (nre_usd)."),
) -> None:
    """Manufacturing cost of one accelerator: dies, yield, HBM, interposer, assembly, test (USD)."""
    from llmsim.output.writers import emit, fmt_number
    from llmsim.spec.cost import PART_COLUMNS, accelerator_cost

    c = accelerator_cost(registry(ctx).get("accelerators", accelerator), yield_model, volume)
    flat = {k: v for k, v in c.items() if k != "dies"}
    if fmt is not Format.table:
        emit([flat], fmt.value, ["accelerator", "device_cost_usd", *PART_COLUMNS, "package", "yield_model",
                                 "interposer_mm2", "assembly_yield", "volume", "nre_total_usd"])
        return
    labels = {"logic_raw_usd": "logic dies (wafer / dies per wafer)", "logic_yield_loss_usd": "logic yield loss",
              "hbm_usd": "HBM", "interposer_usd": f"interposer / package ({c['package']})",
              "assembly_loss_usd": "assembly yield loss (scrapped good dies)", "test_assembly_usd": "final test",
              "kgd_test_usd": "known-good-die test (wafer sort)",
              "nre_usd": (f"NRE: ${c['nre_total_usd'] / 1e6:,.0f}M design and masks / {volume:,.0f} units" if volume
                          else "NRE (not counted; give --volume)")}
    total = c["device_cost_usd"]
    rows = [{"part": labels[k], "usd": fmt_number(c[k]), "share": f"{100 * c[k] / total:.1f}%"}
            for k in PART_COLUMNS] + [{"part": "total", "usd": fmt_number(total), "share": "100%"}]
    emit(rows, "table", title=f"{c['accelerator']}: manufacturing cost per good device (USD)",
         headers={"usd": "USD"})
    dies = [{"die": d["die"], "count": d["count"], "dies_per_wafer": fmt_number(d["dies_per_wafer"]),
             "yield": f"{100 * d['yield']:.1f}%", "raw_usd": fmt_number(d["raw_usd"]),
             "good_usd": fmt_number(d["good_usd"]), "test_usd": fmt_number(d["test_usd"])} for d in c["dies"]]
    emit(dies, "table", title=f"Logic dies ({c['yield_model']} yield); interposer {fmt_number(c['interposer_mm2'])} "
                              f"mm2, assembly yield {100 * c['assembly_yield']:.1f}%",
         headers={"dies_per_wafer": "dies/wafer", "raw_usd": "USD raw", "good_usd": "USD per good die",
                  "test_usd": "USD sort test"})




# the scenario flags a search takes (spec/flags.py): what it is run on, not the split it searches
search_cmd = with_flags(_search, ("model", "accelerator", "devices", "network", "global_batch_size", "seq_len",
                                  "precision"))
