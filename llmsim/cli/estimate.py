"""`llmsim check` and `llmsim estimate`: one design point, resolved and printed (table, JSON or CSV)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from llmsim.cli.common import (
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
    evaluate_point,
    registry,
)
from llmsim.engine.settings import flag_help


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


def estimate(
    ctx: typer.Context,
    scenario: Path | None = SCENARIO,
    model: str | None = MODEL,
    accelerator: str | None = ACCELERATOR,
    devices: int | None = DEVICES,
    network: str | None = NETWORK,
    tp: int | None = typer.Option(None, "--tp", help=flag_help("tp")),
    pp: int | None = typer.Option(None, "--pp", help=flag_help("pp")),
    dp: int | None = typer.Option(None, "--dp", help=flag_help("dp")),
    cp: int | None = typer.Option(None, "--cp", help=flag_help("cp")),
    ep: int | None = typer.Option(None, "--ep", help=flag_help("ep")),
    microbatch_size: str | None = typer.Option(None, "--microbatch-size", metavar="N|auto",
                                               help=flag_help("microbatch_size")),
    global_batch_size: int | None = GLOBAL_BATCH,
    seq_len: int | None = SEQ_LEN,
    recompute: str | None = typer.Option(None, "--recompute", help=flag_help("recompute")),
    zero_stage: int | None = typer.Option(None, "--zero-stage", help=flag_help("zero_stage")),
    precision: str | None = PRECISION,
    mode: str | None = typer.Option(None, "--mode", help="training, inference (a static batch) or serving "
                                    "(continuous batching at --concurrency)."),
    concurrency: int | None = typer.Option(None, "--concurrency",
                                           help="Serving: requests in flight over the deployment."),
    request_rate: float | None = typer.Option(None, "--request-rate",
                                              help="Serving: Poisson arrivals per second over the deployment."),
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
    from llmsim.output.writers import emit
    from llmsim.study import records as est

    flags = dict(model=model, accelerator=accelerator, devices=devices, network=network, tp=tp, pp=pp, dp=dp,
                 cp=cp, ep=ep, microbatch_size=microbatch_size, global_batch_size=global_batch_size,
                 seq_len=seq_len, recompute=recompute, zero_stage=zero_stage,
                 precision=precision, mode=mode, batch_size=batch_size, input_len=input_len,
                 output_len=output_len, kv_precision=kv_precision, concurrency=concurrency,
                 request_rate=request_rate)
    overrides = est.overrides_from_flags(flags, set_)
    sc = est.load(scenario, registry(ctx), overrides)
    rec = evaluate_point(est.operator_rows if ops else est.record, sc, scenario, overrides)
    if sc.workload.mode == "training" and not ops:
        which = "the fastest that fits" if rec["fits_in_memory"] else "none fits: the fastest"
        from llmsim.study.auto import auto_choices

        for knob, choices in auto_choices(sc).items():
            sys.stderr.write(f"llmsim estimate: {knob} auto -> {rec[knob]} ({which} of "
                             f"{', '.join(map(str, choices))})\n")
    if ops:
        from llmsim.output.tables import print_operators

        print_operators(rec) if fmt is Format.table else emit(rec, fmt.value)
    elif fmt is Format.table:
        from llmsim.output.tables import print_estimate

        print_estimate(rec)
    elif fmt is Format.json:
        from llmsim.output.writers import to_json

        sys.stdout.write(to_json(rec))
    else:
        emit([rec], "csv")
