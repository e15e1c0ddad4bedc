"""``llmsim validate --report DIR``: the validation as a Markdown report with parity plots.

Writes ``DIR/README.md`` (no date, no timing: the same code and data give the same files),
``DIR/parity-training.png`` and ``DIR/parity-inference.png``. Every file is written to a temporary
file in ``DIR`` and renamed into place, so a reader never sees a half-written report.
matplotlib is imported only here, with the non-interactive ``Agg`` backend.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

from llmsim.atomic import WriteError, atomic_file
from llmsim.spec.errors import SpecError

TRAINING_PNG = "parity-training.png"
INFERENCE_PNG = "parity-inference.png"
_MARKERS = "osD^vP*X"


def write_report(out_dir: str | Path, rows: list[dict], skipped: list[dict], inf_rows: list[dict],
                 inf_skipped: list[dict], accuracy: list[dict] | None = None) -> list[Path]:
    """Write the report into ``out_dir`` (created if missing); return the paths written. ``accuracy``:
    ``validation.accuracy.accuracy_table`` (in-sample and, when run, cross-validated error)."""
    plt = _pyplot()
    from llmsim.validation import runs as val

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WriteError(err.errno, err.strerror, str(out)) from None
    paths = [out / TRAINING_PNG, out / INFERENCE_PNG, out / "README.md"]
    tput = _throughput(inf_rows)
    train_title = (f"Training: {len(rows)} runs, in-sample mean abs. error "
                   f"{_pct(val.summary(rows)[0]['mean_abs_error'])}")
    inf_title = (f"Serving throughput: {len(tput)} benchmarks, in-sample mean abs. error "
                 f"{_pct(val.summary(tput)[0]['mean_abs_error'])}")
    _write_bytes(paths[0], parity_png(plt, rows, ("framework", "hardware"), "tokens/s per device", train_title))
    _write_bytes(paths[1], parity_png(plt, tput, ("hardware",), "output tokens/s per device", inf_title))
    _write_bytes(paths[2], markdown(rows, skipped, inf_rows, inf_skipped, out_dir, accuracy).encode("utf-8"))
    return paths


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SpecError("needs matplotlib: pip install 'llmsim[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _write_bytes(path: Path, data: bytes) -> None:
    with atomic_file(path) as tmp:
        Path(tmp).write_bytes(data)


# ---------------------------------------------------------------------------------------------- plots

def parity_png(plt, rows: list[dict], group_keys: tuple[str, ...], unit: str, title: str) -> bytes:
    """Left: predicted against measured on log-log axes, y = x with +-10 % and +-20 % bands; right: the
    error (predicted / measured - 1) against measured, same bands. One colour per value of the first
    group key, one marker per value of the second. Returns PNG bytes."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

    meas = np.array([r["measured_tokens_per_s_per_device"] for r in rows], dtype=float)
    pred = np.array([r["predicted_tokens_per_s_per_device"] for r in rows], dtype=float)
    err = 100 * (pred / meas - 1) if len(rows) else meas
    lo, hi = (min(meas.min(), pred.min()) / 1.6, max(meas.max(), pred.max()) * 1.6) if len(rows) else (1.0, 10.0)
    fig, (ax, res) = plt.subplots(1, 2, figsize=(12.5, 6.0), dpi=110, gridspec_kw={"width_ratios": (1.0, 0.9)})
    xs = np.geomspace(lo, hi, 200)
    ax.fill_between(xs, xs * 0.8, xs * 1.2, color="0.91", lw=0, label="±20 %", zorder=0)
    ax.fill_between(xs, xs * 0.9, xs * 1.1, color="0.80", lw=0, label="±10 %", zorder=1)
    ax.plot(xs, xs, color="0.25", lw=1.0, ls="--", label="predicted = measured", zorder=2)
    res.axhspan(-20, 20, color="0.91", lw=0, zorder=0)
    res.axhspan(-10, 10, color="0.80", lw=0, zorder=1)
    res.axhline(0, color="0.25", lw=1.0, ls="--", zorder=2)
    colour_values = sorted({r[group_keys[0]] for r in rows})
    marker_values = sorted({r[group_keys[-1]] for r in rows}) if len(group_keys) > 1 else []
    cmap = plt.get_cmap("tab10")
    for key in sorted({tuple(r[k] for k in group_keys) for r in rows}):
        sel = [i for i, r in enumerate(rows) if tuple(r[k] for k in group_keys) == key]
        style = dict(s=44, color=cmap(colour_values.index(key[0]) % 10), edgecolor="black", linewidth=0.5,
                     alpha=0.9, zorder=3,
                     marker=_MARKERS[marker_values.index(key[-1]) % len(_MARKERS)] if marker_values else "o")
        ax.scatter(meas[sel], pred[sel], label=f"{' · '.join(key)} ({len(sel)})", **style)
        res.scatter(meas[sel], err[sel], **style)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), aspect="equal",
           xlabel=f"measured {unit}", ylabel=f"predicted {unit}", title="predicted vs measured")
    span = max(30.0, 5 * math.ceil(float(np.abs(err).max()) / 5 + 1)) if len(rows) else 30.0
    res.set_xscale("log")
    res.set_xlim(lo, hi)
    res.set_ylim(-span, span)
    res.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    compact = FuncFormatter(lambda v, _: _compact(v))
    for axis in (ax.xaxis, ax.yaxis, res.xaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(compact)
        axis.set_minor_formatter(NullFormatter())
    res.set(xlabel=f"measured {unit}", ylabel="error: predicted / measured - 1", title="error per record")
    for a in (ax, res):
        a.grid(True, which="major", color="0.85", lw=0.6)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.95)
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _compact(v: float) -> str:
    """Tick label: 500, 2k, 50k, 1M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:g}{suffix}"
    return f"{v:g}"


# ------------------------------------------------------------------------------------------- markdown

def _throughput(rows: list[dict]) -> list[dict]:
    return [r for r in rows if "measured_tokens_per_s_per_device" in r]


def _headline(accuracy: list[dict] | None, mode: str, rows: list[dict], noun: str, by: str = "all",
              value: str = "all") -> str:
    """The cross-validated MAE (llmsim's accuracy) of a mode's group when it was run, then the in-sample one."""
    row = next((a for a in accuracy or [] if a["mode"] == mode and a["by"] == by and a["value"] == value), None)
    in_sample = f"in-sample MAE {_pct(row['in_sample_mae'] if row else _mae_of(rows))}"
    if row and "cross_validated_mae" in row:
        return (f"cross-validated MAE **{_pct(row['cross_validated_mae'])}** over {len(rows)} {noun} "
                f"({in_sample}; with llmsim's defaults for choices fixed from the record "
                f"{_pct(row['defaults_mae'])})")
    return f"MAE **{_pct(_mae_of(rows))}** over {len(rows)} {noun} (in-sample)"


def _recent(accuracy: list[dict]) -> str:
    """The 2025-2026 serving records' MAE by metric, MoE and dense apart (cross-validated where run)."""
    names = {"throughput_tokens_per_s_per_device": "output tokens/s per GPU", "ttft_s": "TTFT", "tpot_s": "TPOT"}
    parts = []
    for a in accuracy:
        if a["by"] == "serving 2025-2026":
            metric, arch = a["value"].rsplit(" ", 1)
            err = a.get("cross_validated_mae", a["in_sample_mae"])
            parts.append(f"{names.get(metric, metric)} {arch} {_pct(err)} ({a['records']})")
    return ", ".join(parts)


def _mae_of(rows: list[dict]) -> float:
    return sum(abs(r["rel_error"]) for r in rows) / len(rows) if rows else math.nan


def markdown(rows: list[dict], skipped: list[dict], inf_rows: list[dict], inf_skipped: list[dict],
             out_dir: str | Path = "docs/validation", accuracy: list[dict] | None = None) -> str:
    from llmsim.validation import runs as val

    latency = [r for r in inf_rows if "measured_ttft_s" in r]
    decode = [r for r in inf_rows if "measured_tpot_s" in r]
    inf_rows = _throughput(inf_rows)
    train_sum, inf_sum = val.summary(rows), val.summary(inf_rows + latency + decode)
    fitted = [r for r in inf_rows + latency + decode if r.get("record_set") != "serving_2026"]
    lines = [
        "# llmsim validation report",
        "",
        f"Generated by `llmsim validate --report {Path(out_dir).as_posix()}` from the calibration set",
        "`llmsim/data/published_runs.yaml`, `decode_latency_runs.yaml`, `serving_runs.yaml` and",
        "`serving_runs_2026.yaml`; do not edit by hand.",
        "Each record of the calibration set is converted into a scenario, estimated, and its predicted",
        "throughput per device (or first-token latency) held against the measured one. Error = predicted /",
        "measured - 1; the mean absolute error (MAE) is the mean of |error| over the records of a group.",
        "In-sample errors flatter llmsim: its fitted constants were fitted on these records. The",
        "cross-validated error refits them without each source and predicts that source: it is the error",
        "to expect on a run llmsim has not seen.",
        "",
        f"- **Training**: {_headline(accuracy, 'training', rows, 'runs')} (tokens/s per device).",
        (f"- **Inference**: {_headline(accuracy, 'inference', fitted, 'benchmarks', 'set', 'fitted records')} "
         "(output tokens/s per device; time to first token; time per output token; static batches and "
         "closed-loop serving)."),
        *([(f"- **Serving 2025-2026** (`serving_runs_2026.yaml`: scored, never fitted, so in-sample is out of "
           f"sample): {_recent(accuracy)}.")] if any(a["by"] == "serving 2025-2026" for a in accuracy or []) else []),
        f"- Not modelled: {len(skipped) + len(inf_skipped)} records (reasons [below](#records-not-modelled)).",
        "",
        f"How the model works, and every calibration factor: {_methodology_link(out_dir)}.",
        "",
        "## Training",
        "",
        f"![Training parity plot: predicted vs measured tokens/s per device]({TRAINING_PNG})",
        "",
        "Mean absolute error by group:",
        "",
    ]
    lines += _table(["group", "value", "records", "MAE"],
                    [[s["group"], s["value"], str(s["records"]), _pct(s["mean_abs_error"])] for s in train_sum],
                    "llrr")
    pairs = val.recompute_pairs(rows)
    if pairs:
        lines += ["", "Selective vs full recomputation speed-up (Korthikanti et al. 2022, Table 5):", ""]
        lines += _table(["pair", "measured", "predicted", "difference"],
                        [[p["pair"], _pct(p["measured_speedup"]), _pct(p["predicted_speedup"]),
                          f"{p['difference_points']:+.1f} points"] for p in pairs], "lrrr")
    lines += ["", "Every training record (measured throughput as the source gives it, or derived from its step",
              "time or TFLOP/s with its own FLOP convention: column *measured from*):", ""]
    lines += _table(
        ["id", "framework", "hardware", "measured tok/s/dev", "predicted tok/s/dev", "error", "pred. MFU",
         "fits", "measured from", "assumptions"],
        [[f"`{r['id']}`", r["framework"], r["hardware"], _num(r["measured_tokens_per_s_per_device"]),
          _num(r["predicted_tokens_per_s_per_device"]), _signed(r["rel_error"]), _pct(r["mfu"]),
          "yes" if r["fits_in_memory"] else "**no**", r["measured_from"], r["assumptions"] or "-"]
         for r in rows], "lllrrrrlll")
    if accuracy:
        cv = "cross_validated_mae" in accuracy[0]
        lines += ["", "## Error by source and hardware", "", "Mean absolute error per source (a publication or "
                  "benchmark table) and per accelerator" + (": in-sample, with llmsim's defaults, cross-validated:"
                                                            if cv else ":"), ""]
        lines += _table(["mode", "by", "value", "records", "in-sample", "defaults", *(["cross-validated"] if cv else [])],
                        [[a["mode"], a["by"], a["value"], str(a["records"]), _pct(a["in_sample_mae"]),
                          _pct(a["defaults_mae"]), *([_pct(a["cross_validated_mae"])] if cv else [])] for a in accuracy],
                        "lllrrr" + ("r" if cv else ""))
    lines += ["", "## Inference", "",
              f"![Inference parity plot: predicted vs measured output tokens/s per device]({INFERENCE_PNG})",
              "", "Mean absolute error by group:", ""]
    lines += _table(["group", "value", "records", "MAE"],
                    [[s["group"], s["value"], str(s["records"]), _pct(s["mean_abs_error"])] for s in inf_sum],
                    "llrr")
    lines += ["", ("Every serving-throughput record (batch: as published, the largest static batch that fits, or "
                   "the requests running in a closed loop):"), ""]
    lines += _table(
        ["id", "hardware", "measured out tok/s/dev", "predicted out tok/s/dev", "error", "batch", "TTFT (s)",
         "TPOT (ms)", "fits", "assumptions"],
        [[f"`{r['id']}`", r["hardware"], _num(r["measured_tokens_per_s_per_device"]),
          _num(r["predicted_tokens_per_s_per_device"]), _signed(r["rel_error"]), f"{r['batch_size']:,}",
          f"{r['ttft_s']:.3g}", f"{1e3 * r['tpot_s']:.3g}", "yes" if r["fits_in_memory"] else "**no**",
          r["assumptions"] or "-"] for r in inf_rows], "llrrrrrrll")
    if latency:
        lines += ["", "First-token latency (TensorRT-LLM v0.9.0 at batch 1; closed loops, `serving_runs.yaml`):", ""]
        lines += _table(["id", "hardware", "measured TTFT (ms)", "predicted TTFT (ms)", "error", "assumptions"],
                        [[f"`{r['id']}`", r["hardware"], f"{1e3 * r['measured_ttft_s']:.3g}",
                          f"{1e3 * r['predicted_ttft_s']:.3g}", _signed(r["rel_error"]), r["assumptions"] or "-"]
                         for r in latency], "llrrrl")
    if decode:
        lines += ["", "Time per output token (batch 1, `decode_latency_runs.yaml`; closed loops, `serving_runs.yaml`):",
                  ""]
        lines += _table(["id", "framework", "hardware", "measured TPOT (ms)", "predicted TPOT (ms)", "error",
                         "assumptions"],
                        [[f"`{r['id']}`", r["framework"], r["hardware"], f"{1e3 * r['measured_tpot_s']:.3g}",
                          f"{1e3 * r['predicted_tpot_s']:.3g}", _signed(r["rel_error"]), r["assumptions"] or "-"]
                         for r in decode], "lllrrrl")
    lines += ["", "## Records not modelled", ""]
    both = [{"mode": "training", **s} for s in skipped] + [{"mode": "inference", **s} for s in inf_skipped]
    lines += _table(["id", "mode", "reason"], [[f"`{s['id']}`", s["mode"], s["reason"]] for s in both], "lll") \
        if both else ["None."]
    return "\n".join(lines) + "\n"


def _methodology_link(out_dir: str | Path) -> str:
    """A relative link to docs/methodology.md when the report sits in a checkout that has it."""
    doc = Path(__file__).resolve().parents[2] / "docs" / "methodology.md"
    if not doc.exists():
        return "`docs/methodology.md` in the llmsim repository"
    rel = Path(os.path.relpath(doc, Path(out_dir).resolve())).as_posix()
    return f"[`docs/methodology.md`]({rel})"


def _table(head: list[str], body: list[list[str]], align: str) -> list[str]:
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(row) + " |" for row in [head, rule] + [[_cell(c) for c in r] for r in body]]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _signed(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"
