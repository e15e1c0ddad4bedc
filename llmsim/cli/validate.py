"""`llmsim validate`: predictions held against published measured runs, per record and per group."""

from __future__ import annotations

from pathlib import Path

import typer

from llmsim.cli.common import Format, registry


def validate_cmd(
    ctx: typer.Context,
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json (per-record rows)."),
    report: Path | None = typer.Option(None, "--report", metavar="DIR",
                                       help="Also write DIR/README.md and parity plots (needs matplotlib)."),
) -> None:
    """Hold training and inference predictions against published measured runs; errors per record and group."""
    from llmsim.output.writers import emit
    from llmsim.validation import runs as val

    rows, skipped = val.run(registry(ctx), val.TRAINING)
    inf_rows, inf_skipped = val.run(registry(ctx), val.INFERENCE)
    if report is not None:
        from llmsim.validation.report import write_report

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
