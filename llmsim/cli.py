"""Command-line interface: thin wrappers that parse, load, call the engine and print.

Heavy modules (pandas, joblib, the engine) are imported inside the commands that need them, so
``llmsim --help`` stays fast.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from llmsim import __version__
from llmsim.spec.errors import SpecError

app = typer.Typer(
    name="llmsim",
    help="Analytical performance and cost model for LLM training and inference systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
presets_app = typer.Typer(help="List and show bundled and user presets.", no_args_is_help=True)
app.add_typer(presets_app, name="presets")


class Kind(str, Enum):
    accelerators = "accelerators"
    models = "models"
    networks = "networks"


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"llmsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    presets: list[Path] = typer.Option(
        [], "--presets", metavar="DIR",
        help="Extra preset folder (with accelerators/, models/, networks/); repeatable; "
             "a user preset with a bundled name wins. Also LLMSIM_PRESETS=dir1:dir2."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    ctx.obj = {"preset_dirs": [str(p) for p in presets]}


def registry(ctx: typer.Context):
    from llmsim.spec.presets import PresetRegistry

    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if "registry" not in obj:
        obj["registry"] = PresetRegistry(obj.get("preset_dirs", []))
        root.obj = obj
    return obj["registry"]


@presets_app.command("list")
def presets_list(
    ctx: typer.Context,
    kind: Kind | None = typer.Option(None, "--kind", help="Only this kind, with its key figures."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json."),
) -> None:
    """List presets (name first), with key figures when --kind is given."""
    from llmsim.presets_table import COLUMNS, preset_rows
    from llmsim.report import emit

    k = kind.value if kind else None
    rows = preset_rows(registry(ctx), k)
    emit(rows, fmt.value, COLUMNS[k], title=f"llmsim presets: {k or 'all'}")


@presets_app.command("show")
def presets_show(ctx: typer.Context, name: str = typer.Argument(..., help="Preset name.")) -> None:
    """Show one preset as resolved YAML (defaults filled in), with its sources."""
    import yaml

    reg = registry(ctx)
    kind, path = reg.find(name)
    spec = reg.get(kind, name)
    data = spec.model_dump(mode="json", exclude_none=True)
    typer.echo(f"# {kind[:-1]} preset '{name}' from {path}")
    if kind == "models":
        from llmsim.engine.params import param_counts
        from llmsim.spec.convert import model_values

        counts = param_counts(model_values(spec))
        typer.echo(f"# derived: {counts.total / 1e9:.2f}e9 parameters, {counts.active / 1e9:.2f}e9 active per token")
    typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120), nl=False)


@app.command("check")
def check(
    ctx: typer.Context,
    scenario: Path = typer.Argument(..., help="Scenario YAML file."),
    set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE",
                                   help="Override a field, e.g. --set parallel.tp=4 (repeatable)."),
) -> None:
    """Validate a scenario file and print it resolved (presets expanded, defaults filled in)."""
    import yaml

    from llmsim.spec.load import load_scenario

    spec = load_scenario(scenario, registry(ctx), set_)
    data = spec.model_dump(mode="json", exclude_none=True)
    typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120), nl=False)


class Recompute(str, Enum):
    none = "none"
    selective = "selective"
    full = "full"


@app.command("estimate")
def estimate(
    ctx: typer.Context,
    scenario: Path | None = typer.Argument(None, help="Scenario YAML; default: llama3-70b on 64 h100-sxm."),
    model: str | None = typer.Option(None, "--model", help="Model preset name."),
    accelerator: str | None = typer.Option(None, "--accelerator", help="Accelerator preset name."),
    devices: int | None = typer.Option(None, "--devices", help="Number of accelerators."),
    network: str | None = typer.Option(None, "--network", help="Network preset name."),
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel degree."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline-parallel degree."),
    dp: int | None = typer.Option(None, "--dp", help="Data-parallel degree (derived when omitted)."),
    cp: int | None = typer.Option(None, "--cp", help="Context-parallel degree."),
    ep: int | None = typer.Option(None, "--ep", help="Expert-parallel degree."),
    microbatch_size: int | None = typer.Option(None, "--microbatch-size", help="Sequences per microbatch."),
    global_batch_size: int | None = typer.Option(None, "--global-batch-size",
                                                     help="Sequences per optimizer step."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Tokens per sequence."),
    recompute: Recompute | None = typer.Option(None, "--recompute", help="none, selective or full."),
    zero_stage: int | None = typer.Option(None, "--zero-stage", min=0, max=3, help="ZeRO stage 0-3."),
    precision: str | None = typer.Option(None, "--precision", help="bf16, fp16, fp8 or fp4."),
    mode: str | None = typer.Option(None, "--mode", help="training or inference."),
    batch_size: str | None = typer.Option(None, "--batch-size",
                                          help="Inference: concurrent sequences, or 'max' (largest that fits)."),
    input_len: int | None = typer.Option(None, "--input-len", help="Inference: prompt tokens per sequence."),
    output_len: int | None = typer.Option(None, "--output-len", help="Inference: generated tokens per sequence."),
    kv_precision: str | None = typer.Option(None, "--kv-precision", help="Inference: KV-cache precision."),
    ops: bool = typer.Option(False, "--ops", help="Per-operator table: FLOPs, bytes, intensity, bound, time."),
    set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE",
                                   help="Override any field, e.g. --set parallel.virtual_stages=2."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv (header + one row) or json."),
) -> None:
    """Estimate one design point: training (step time, throughput, MFU, memory) or inference (TTFT,
    TPOT, throughput, KV cache, memory)."""
    from llmsim import estimate as est
    from llmsim.report import emit

    flags = dict(model=model, accelerator=accelerator, devices=devices, network=network, tp=tp, pp=pp, dp=dp,
                 cp=cp, ep=ep, microbatch_size=microbatch_size, global_batch_size=global_batch_size,
                 seq_len=seq_len, recompute=recompute.value if recompute else None, zero_stage=zero_stage,
                 precision=precision, mode=mode, batch_size=batch_size, input_len=input_len,
                 output_len=output_len, kv_precision=kv_precision)
    sc = est.load(scenario, registry(ctx), est.overrides_from_flags(flags, set_))
    try:
        rec = est.operator_rows(sc) if ops else est.record(sc)
    except SpecError as err:  # impossible split: name the scenario it came from
        if err.file is not None:
            raise
        raise SpecError(err.message, file=str(scenario or est.DEFAULT_SCENARIO), path=err.path) from None
    if ops:
        from llmsim.tables import print_operators

        print_operators(rec) if fmt is Format.table else emit(rec, fmt.value)
    elif fmt is Format.table:
        from llmsim.tables import print_estimate

        print_estimate(rec)
    elif fmt is Format.json:
        from llmsim.report import to_json

        sys.stdout.write(to_json(rec))
    else:
        emit([rec], "csv")


@app.command("sweep")
def sweep_cmd(
    ctx: typer.Context,
    spec: Path = typer.Argument(..., help="Sweep spec YAML (base, grid, zip, constraints, objectives, keep)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to FILE (.csv or .json), atomically."),
    jobs: int = typer.Option(-1, "--jobs", help="Worker processes (-1: all cores)."),
    top: int | None = typer.Option(None, "--top", min=1, help="Keep the best K rows."),
    pareto_only: bool = typer.Option(False, "--pareto-only", help="Keep only the Pareto-optimal rows (rank 0)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    yes: bool = typer.Option(False, "--yes", help="Run sweeps of 10 million points or more."),
) -> None:
    """Evaluate a grid of design points and rank them by Pareto front; CSV on stdout or -o FILE."""
    from llmsim import sweep as sw
    from llmsim.report import to_csv, to_json, write_atomic

    sp = sw.load_sweep(spec)
    n = sp.size
    sys.stderr.write(f"llmsim sweep: {n:,} design points\n")
    if n >= 10_000_000 and not yes:
        raise SpecError(f"{n:,} design points: pass --yes to run a sweep of 10 million points or more",
                        file=str(spec))
    if output is not None and output.suffix not in (".csv", ".json"):
        raise SpecError(f"-o {output}: unknown format {output.suffix!r}; allowed: .csv, .json")
    dirs = tuple(ctx.find_root().obj.get("preset_dirs", []) if isinstance(ctx.find_root().obj, dict) else ())
    show = not quiet and sys.stderr.isatty()
    if show:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("evaluating", total=len(sw.chunks(n, 256)))
            rows = sw.run(sp, dirs, jobs, progress=lambda total: bar.advance(task))
    else:
        rows = sw.run(sp, dirs, jobs)
    rows = sw.rank(rows, sp.objectives)
    if pareto_only:
        rows = [r for r in rows if r.get("pareto_rank") == 0]
    if top:
        rows = rows[:top]
    cols = sw.columns(rows)
    if output is None:
        sys.stdout.write(to_csv(rows, cols))
    else:
        write_atomic(output, to_csv(rows, cols) if output.suffix == ".csv" else to_json(
            [{c: r.get(c) for c in cols} for r in rows]))
        sys.stderr.write(f"llmsim sweep: {len(rows):,} rows written to {output}\n")


@app.command("search")
def search_cmd(
    ctx: typer.Context,
    scenario: Path | None = typer.Argument(None, help="Scenario YAML; default: llama3-70b on 64 h100-sxm."),
    model: str | None = typer.Option(None, "--model", help="Model preset name."),
    accelerator: str | None = typer.Option(None, "--accelerator", help="Accelerator preset name."),
    devices: int | None = typer.Option(None, "--devices", help="Number of accelerators."),
    network: str | None = typer.Option(None, "--network", help="Network preset name."),
    global_batch_size: int | None = typer.Option(None, "--global-batch-size", help="Sequences per step."),
    seq_len: int | None = typer.Option(None, "--seq-len", help="Tokens per sequence."),
    precision: str | None = typer.Option(None, "--precision", help="bf16, fp16, fp8 or fp4."),
    set_: list[str] = typer.Option([], "--set", metavar="PATH=VALUE", help="Override any field."),
    objective: str = typer.Option("tokens_per_s", "--objective", help="Output column to rank by."),
    minimize: bool = typer.Option(False, "--minimize", help="Smaller is better (e.g. cost_per_million_tokens_usd)."),
    top: int = typer.Option(10, "--top", min=1, help="How many splits to show."),
    jobs: int = typer.Option(-1, "--jobs", help="Worker processes (-1: all cores)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json."),
) -> None:
    """Search every feasible training split (tp, pp, microbatch, recompute, ZeRO) and show the best."""
    from llmsim import estimate as est
    from llmsim import search as se
    from llmsim import sweep as sw
    from llmsim.report import emit

    flags = dict(model=model, accelerator=accelerator, devices=devices, network=network,
                 global_batch_size=global_batch_size, seq_len=seq_len, precision=precision)
    overrides = est.overrides_from_flags(flags, set_)
    reg = registry(ctx)
    sc = est.load(scenario, reg, overrides)
    base = se.base_of(scenario, est.DEFAULT_SCENARIO, overrides, reg)
    spec = se.search_spec(base, str(scenario or est.DEFAULT_SCENARIO), sc, objective, not minimize)
    sys.stderr.write(f"llmsim search: {spec.size:,} splits\n")
    dirs = tuple(ctx.find_root().obj.get("preset_dirs", []) if isinstance(ctx.find_root().obj, dict) else ())
    rows = sw.rank(sw.run(spec, dirs, jobs), spec.objectives)[:top]
    if not rows:
        raise SpecError("no split fits in memory; add devices or lower the batch", file=str(scenario or
                                                                                           est.DEFAULT_SCENARIO))
    if fmt is not Format.table:
        emit(rows, fmt.value, sw.columns(rows))
        return
    cols = list(dict.fromkeys([*se.SHOWN, objective]))
    emit(rows, "table", cols, title=f"Best {len(rows)} splits of {rows[0]['model']} on {rows[0]['num_devices']} x "
         f"{rows[0]['accelerator']} by {objective}", headers={"microbatch_size": "mb", "zero_stage": "ZeRO",
                                                             "memory_per_device_gb": "mem GB"})


@app.command("cost")
def cost_cmd(
    ctx: typer.Context,
    accelerator: str = typer.Argument(..., help="Accelerator preset name, e.g. h100-sxm."),
    yield_model: str = typer.Option("negative-binomial", "--yield-model",
                                    help="poisson, murphy, seeds, moore or negative-binomial (alpha 10)."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv (header + one row) or json."),
) -> None:
    """Manufacturing cost of one accelerator: dies, yield, HBM, interposer, assembly, test (USD)."""
    from llmsim.cost import PART_COLUMNS, accelerator_cost
    from llmsim.report import emit, fmt_number

    c = accelerator_cost(registry(ctx).get("accelerators", accelerator), yield_model)
    flat = {k: v for k, v in c.items() if k != "dies"}
    if fmt is not Format.table:
        emit([flat], fmt.value, ["accelerator", "device_cost_usd", *PART_COLUMNS, "package", "yield_model",
                                 "interposer_mm2", "assembly_yield"])
        return
    labels = {"logic_raw_usd": "logic dies (wafer / dies per wafer)", "logic_yield_loss_usd": "logic yield loss",
              "hbm_usd": "HBM", "interposer_usd": f"interposer / package ({c['package']})",
              "assembly_loss_usd": "assembly yield loss (scrapped good dies)", "test_assembly_usd": "final test"}
    total = c["device_cost_usd"]
    rows = [{"part": labels[k], "usd": fmt_number(c[k]), "share": f"{100 * c[k] / total:.1f}%"}
            for k in PART_COLUMNS] + [{"part": "total", "usd": fmt_number(total), "share": "100%"}]
    emit(rows, "table", title=f"{c['accelerator']}: manufacturing cost per good device (USD)",
         headers={"usd": "USD"})
    dies = [{"die": d["die"], "count": d["count"], "dies_per_wafer": fmt_number(d["dies_per_wafer"]),
             "yield": f"{100 * d['yield']:.1f}%", "raw_usd": fmt_number(d["raw_usd"]),
             "good_usd": fmt_number(d["good_usd"])} for d in c["dies"]]
    emit(dies, "table", title=f"Logic dies ({c['yield_model']} yield); interposer {fmt_number(c['interposer_mm2'])} "
                              f"mm2, assembly yield {100 * c['assembly_yield']:.1f}%",
         headers={"dies_per_wafer": "dies/wafer", "raw_usd": "USD raw", "good_usd": "USD per good die"})


@app.command("collective")
def collective_cmd(
    ctx: typer.Context,
    network: str = typer.Option("dgx-h100", "--network", help="Network preset name."),
    op: str = typer.Option("all_reduce", "--op",
                           help="all_reduce, reduce_scatter, all_gather, all_to_all, broadcast or p2p."),
    nbytes: str = typer.Option("1GiB", "--bytes", metavar="SIZE|LO:HI",
                               help="Buffer size as nccl-tests counts it (1GiB, 256MB, 4096); LO:HI sweeps "
                                    "powers of two."),
    ranks: int = typer.Option(8, "--ranks", help="Ranks in the group."),
    stride: int = typer.Option(1, "--stride", help="Devices between consecutive ranks (8 = one per node)."),
    algorithm: str | None = typer.Option(None, "--algorithm",
                                         help="Force one: ring, tree, halving-doubling, bruck, pairwise, "
                                              "direct, torus, in-network, hierarchical."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json."),
) -> None:
    """Time one collective on a network: time, algbw and busbw as nccl-tests defines them (GB = 1e9 B)."""
    from llmsim import collective_cmd as cc
    from llmsim.report import emit
    from llmsim.spec.convert import network_values

    net = network_values(registry(ctx).get("networks", network))
    out = cc.rows(net, op.replace("-", "_"), cc.sizes(nbytes), ranks, stride, algorithm)
    if fmt is not Format.table:
        emit(out, fmt.value, cc.COLUMNS)
        return
    shown = [{**r, "bytes": _size_text(r["bytes"]), "time_s": f"{r['time_s'] * 1e6:,.1f}",
              "algbw_gb_s": f"{r['algbw_gb_s']:.1f}", "busbw_gb_s": f"{r['busbw_gb_s']:.1f}"} for r in out]
    heads = {"time_s": "time (us)", "algbw_gb_s": "algbw (GB/s)", "busbw_gb_s": "busbw (GB/s)"}
    emit(shown, "table", cc.COLUMNS, title=f"{op} on {network}, {ranks} ranks", headers=heads)


def _size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


@app.command("validate")
def validate_cmd(
    ctx: typer.Context,
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json (per-record rows)."),
) -> None:
    """Hold training and inference predictions against published measured runs; errors per record and group."""
    from llmsim import validate as val
    from llmsim import validate_inference as vinf
    from llmsim.report import emit

    rows, skipped = val.run(registry(ctx))
    inf_rows, inf_skipped = vinf.run(registry(ctx))
    if fmt is not Format.table:
        emit([{"mode": "training", **r} for r in rows] + [{"mode": "inference", **r} for r in inf_rows], fmt.value)
        return
    cols = ["id", "framework", "hardware", "measured_tokens_per_s_per_device",
            "predicted_tokens_per_s_per_device", "rel_error", "mfu", "fits_in_memory"]
    heads = {"measured_tokens_per_s_per_device": "measured tok/s/dev",
             "predicted_tokens_per_s_per_device": "predicted tok/s/dev", "rel_error": "error",
             "mfu": "pred. MFU", "fits_in_memory": "fits"}
    shown = [{**r, "rel_error": f"{100 * r['rel_error']:+.1f}%", "mfu": f"{100 * r['mfu']:.1f}%"} for r in rows]
    emit(shown, "table", cols, title="Training throughput: predicted vs measured", headers=heads)
    summary = [{**s, "mean_abs_error": f"{100 * s['mean_abs_error']:.1f}%"} for s in val.summary(rows)]
    emit(summary, "table", title="Training: mean absolute error by group")
    pairs = [{"pair": p["pair"], "measured": f"{100 * p['measured_speedup']:.1f}%",
              "predicted": f"{100 * p['predicted_speedup']:.1f}%",
              "difference": f"{p['difference_points']:+.1f} points"} for p in val.recompute_pairs(rows)]
    emit(pairs, "table", title="Selective vs full recomputation speed-up (Korthikanti et al. 2022, Table 5)")
    inf_cols = ["id", "hardware", "measured_tokens_per_s_per_device", "predicted_tokens_per_s_per_device",
                "rel_error", "batch_size", "ttft_s", "tpot_s"]
    inf_heads = {**heads, "measured_tokens_per_s_per_device": "measured out tok/s/dev",
                 "predicted_tokens_per_s_per_device": "predicted out tok/s/dev", "batch_size": "batch",
                 "ttft_s": "TTFT (s)", "tpot_s": "TPOT (s)"}
    shown = [{**r, "rel_error": f"{100 * r['rel_error']:+.1f}%"} for r in inf_rows]
    emit(shown, "table", inf_cols, title="Inference output throughput (offline, max batch): predicted vs measured",
         headers=inf_heads)
    summary = [{**s, "mean_abs_error": f"{100 * s['mean_abs_error']:.1f}%"} for s in val.summary(inf_rows)]
    emit(summary, "table", title="Inference: mean absolute error by group")
    if skipped or inf_skipped:
        emit(skipped + inf_skipped, "table", title="Records not modelled")


def main() -> None:
    """Entry point: bad input is one line on stderr and exit status 2, never a traceback."""
    try:
        app()
    except SpecError as err:
        sys.stderr.write(f"llmsim: error: {err}\n")
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("llmsim: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:  # e.g. `llmsim ... | head`
        sys.exit(0)


if __name__ == "__main__":
    main()
