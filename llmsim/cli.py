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
from llmsim.cli_common import (
    ACCELERATOR,
    DEVICES,
    GLOBAL_BATCH,
    MODEL,
    NETWORK,
    PRECISION,
    SCENARIO,
    SEQ_LEN,
    SET,
    Format,
    registry,
)
from llmsim.cli_design import cost_cmd, search_cmd, sweep_cmd
from llmsim.cli_plot import make_plot_app
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
    scenario: Path | None = SCENARIO,
    model: str | None = MODEL,
    accelerator: str | None = ACCELERATOR,
    devices: int | None = DEVICES,
    network: str | None = NETWORK,
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel degree."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline-parallel degree."),
    dp: int | None = typer.Option(None, "--dp", help="Data-parallel degree (derived when omitted)."),
    cp: int | None = typer.Option(None, "--cp", help="Context-parallel degree."),
    ep: int | None = typer.Option(None, "--ep", help="Expert-parallel degree."),
    microbatch_size: int | None = typer.Option(None, "--microbatch-size", help="Sequences per microbatch."),
    global_batch_size: int | None = GLOBAL_BATCH,
    seq_len: int | None = SEQ_LEN,
    recompute: Recompute | None = typer.Option(None, "--recompute", help="none, selective or full."),
    zero_stage: int | None = typer.Option(None, "--zero-stage", min=0, max=3, help="ZeRO stage 0-3."),
    precision: str | None = PRECISION,
    mode: str | None = typer.Option(None, "--mode", help="training or inference."),
    batch_size: str | None = typer.Option(None, "--batch-size",
                                          help="Inference: concurrent sequences, or 'max' (largest that fits)."),
    input_len: int | None = typer.Option(None, "--input-len", help="Inference: prompt tokens per sequence."),
    output_len: int | None = typer.Option(None, "--output-len", help="Inference: generated tokens per sequence."),
    kv_precision: str | None = typer.Option(None, "--kv-precision", help="Inference: KV-cache precision."),
    ops: bool = typer.Option(False, "--ops", help="Per-operator table: FLOPs, bytes, intensity, bound, time."),
    set_: list[str] = SET,
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv (header + one row) or json."),
) -> None:
    """Estimate one design point: training step time, MFU, memory; or inference TTFT, TPOT, KV cache."""
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
    report: Path | None = typer.Option(None, "--report", metavar="DIR",
                                       help="Also write DIR/README.md and parity plots (needs matplotlib)."),
) -> None:
    """Hold training and inference predictions against published measured runs; errors per record and group."""
    from llmsim import validate as val
    from llmsim import validate_inference as vinf
    from llmsim.report import emit

    rows, skipped = val.run(registry(ctx))
    inf_rows, inf_skipped = vinf.run(registry(ctx))
    if report is not None:
        from llmsim.validate_report import write_report

        write_report(report, rows, skipped, inf_rows, inf_skipped)
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


app.command("sweep")(sweep_cmd)
app.command("search")(search_cmd)
app.command("cost")(cost_cmd)
app.add_typer(make_plot_app(estimate), name="plot")


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
