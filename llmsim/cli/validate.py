"""`llmsim validate`: predictions held against published measured runs, per record and per group."""

from __future__ import annotations

from pathlib import Path

import typer

from llmsim.cli.common import Format, registry, workers


def validate_cmd(
    ctx: typer.Context,
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json (per-record rows)."),
    report: Path | None = typer.Option(None, "--report", metavar="DIR",
                                       help="Also write DIR/README.md and parity plots (needs matplotlib)."),
    cross_validate: bool = typer.Option(False, "--cross-validate",
                                        help="Refit the fitted constants without each source and predict it: "
                                             "the error to expect on runs llmsim has not seen."),
    jobs: int = typer.Option(-1, "--jobs", help="Worker processes for --cross-validate (-1: all cores)."),
) -> None:
    """Hold training and inference predictions against published measured runs; errors per record, source
    and group (in-sample, and cross-validated with --cross-validate)."""
    from llmsim.output.writers import emit
    from llmsim.validation import runs as val
    from llmsim.validation.accuracy import accuracy_table, assess

    a = assess(registry(ctx), cross_validate, workers(jobs, "validate"))
    rows, inf_rows, skipped = a.training, a.inference, a.skipped
    if report is not None:
        from llmsim.validation.report import write_report

        write_report(report, rows, skipped, inf_rows, [], accuracy_table(a))
    if fmt is not Format.table:
        emit([{"mode": "training", **r} for r in rows] + [{"mode": "inference", **r} for r in inf_rows], fmt.value)
        return
    cv = ["cv_rel_error"] if cross_validate else []
    pct = lambda x: f"{100 * x:+.1f}%"
    heads = {"measured_tokens_per_s_per_device": "measured tok/s/dev",
             "predicted_tokens_per_s_per_device": "predicted tok/s/dev", "rel_error": "error (in-sample)",
             "cv_rel_error": "error (cross-val.)", "mfu": "pred. MFU", "fits_in_memory": "fits"}
    cols = ["id", "framework", "hardware", "measured_tokens_per_s_per_device",
            "predicted_tokens_per_s_per_device", "rel_error", *cv, "mfu", "fits_in_memory"]
    shown = [{**r, "rel_error": pct(r["rel_error"]), "mfu": f"{100 * r['mfu']:.1f}%",
              **({"cv_rel_error": pct(r["cv_rel_error"])} if cv else {})} for r in rows]
    emit(shown, "table", cols, title="Training throughput: predicted vs measured", headers=heads)
    pairs = [{"pair": p["pair"], "measured": f"{100 * p['measured_speedup']:.1f}%",
              "predicted": f"{100 * p['predicted_speedup']:.1f}%",
              "difference": f"{p['difference_points']:+.1f} points"} for p in val.recompute_pairs(rows)]
    emit(pairs, "table", title="Selective vs full recomputation speed-up (Korthikanti et al. 2022, Table 5)")
    inf_cols = ["id", "hardware", "measured_tokens_per_s_per_device", "predicted_tokens_per_s_per_device",
                "measured_ttft_s", "predicted_ttft_s", "rel_error", *cv, "batch_size"]
    inf_heads = {**heads, "measured_tokens_per_s_per_device": "measured out tok/s/dev",
                 "predicted_tokens_per_s_per_device": "predicted out tok/s/dev", "batch_size": "batch",
                 "measured_ttft_s": "measured TTFT (s)", "predicted_ttft_s": "predicted TTFT (s)"}
    shown = [{**r, "rel_error": pct(r["rel_error"]), **({"cv_rel_error": pct(r["cv_rel_error"])} if cv else {})}
             for r in inf_rows]
    emit(shown, "table", inf_cols, title="Serving: output throughput and first-token latency, predicted vs "
         "measured", headers=inf_heads)
    acc = [{k: (f"{100 * v:.1f}%" if k.endswith("_mae") else v) for k, v in row.items()} for row in accuracy_table(a)]
    emit(acc, "table", title="Mean absolute error: in-sample (the fitted constants saw these records), with "
         "llmsim's defaults for choices fixed from the record" + (", and cross-validated (leave one source out)"
                                                                 if cv else ""),
         headers={"in_sample_mae": "in-sample", "defaults_mae": "defaults", "cross_validated_mae": "cross-validated"})
    if not cross_validate:
        import sys

        sys.stderr.write("llmsim validate: these errors are in-sample; run with --cross-validate for the error "
                         "to expect on runs llmsim has not seen\n")
    if skipped:
        emit(skipped, "table", title="Records not modelled")


def calibrate_cmd(
    ctx: typer.Context,
    output: Path | None = typer.Option(None, "-o", "--output",
                                       help="Write here instead of the calibration file llmsim reads."),
    check: bool = typer.Option(False, "--check", help="Fit, compare with the shipped constants, write nothing; "
                                                      "exit 1 when they differ."),
    jobs: int = typer.Option(-1, "--jobs", help="Worker processes for the cross-validation (-1: all cores)."),
) -> None:
    """Fit the constants no measurement gives (least squares on log error over the calibration set) and
    write them, with their cross-validated error and provenance, to llmsim/data/calibration.json."""
    import sys

    from llmsim.engine import calibration as cal
    from llmsim.validation import calibrate as fitting
    from llmsim.validation.runs import cases

    target = output or cal.CALIBRATION_FILE
    if not target.resolve().parent.is_dir():
        from llmsim.spec.errors import SpecError

        raise SpecError(f"-o {target}: directory {target.resolve().parent} does not exist")
    items, skipped = cases(registry(ctx))
    sys.stderr.write(f"llmsim calibrate: {len(items)} records ({len(skipped)} not modelled), fitting "
                     f"{', '.join(cal.FITTED)}\n")
    if check:
        values = fitting.fit(items)
        same = values == cal.fitted_values()
        for name, v in values.items():
            typer.echo(f"{name}: fitted {v:g}, shipped {cal.fitted_values()[name]:g}")
        raise typer.Exit(0 if same else 1)
    content = fitting.calibrate(items, workers(jobs, "calibrate"))
    fitting.write(target, content)
    err = content["error"]
    for name, v in content["constants"].items():
        typer.echo(f"{name} = {v:g}")
    for mode in err["in_sample"]:
        typer.echo(f"{mode}: in-sample MAE {100 * err['in_sample'][mode]:.1f}%, cross-validated "
                   f"{100 * err['cross_validated'][mode]:.1f}%")
    sys.stderr.write(f"llmsim calibrate: wrote {target}\n")
