"""`llmsim plot`: figures (PNG or SVG) of sweep results and scenarios; registered on the app in cli/app.py.

``roofline`` and ``breakdown`` take exactly the scenario flags of ``llmsim estimate``: their signatures
are built from the estimate command's own parameters (``with_scenario_flags``), so a flag added to
estimate appears here too. matplotlib (the ``plot`` extra) is imported only when a figure is drawn.
"""

from __future__ import annotations

import difflib
import inspect
import sys
from enum import Enum
from pathlib import Path

import typer

from llmsim.cli.common import evaluate_point, registry
from llmsim.spec.errors import SpecError

SUFFIXES = (".png", ".svg")
MATPLOTLIB_MISSING = "llmsim plot needs matplotlib: pip install 'llmsim[plot]'"
NOT_SCENARIO_FLAGS = ("ctx", "ops", "fmt")  # estimate parameters that are not part of the scenario

OUTPUT = typer.Option(..., "-o", "--output", help="Image to write: .png or .svg (atomically).")
RESULTS = typer.Argument(..., help="CSV written by llmsim sweep (rows with an infeasible_reason are skipped).")
X = typer.Option(..., "--x", help="Column on the x axis, e.g. cost_per_million_tokens_usd.")
Y = typer.Option(..., "--y", help="Column on the y axis, e.g. tokens_per_s.")
LOGX = typer.Option(False, "--logx", help="Logarithmic x axis.")
LOGY = typer.Option(False, "--logy", help="Logarithmic y axis.")
X_MAX = typer.Option(None, "--x-max/--x-min",
                     help="Larger / smaller x is better (default: from the name: *_per_s, mfu larger; "
                          "*_usd, *_s, *_gb smaller).")
Y_MAX = typer.Option(None, "--y-max/--y-min", help="Larger / smaller y is better (default: from the name).")
SOURCE = typer.Argument(None, help="Results CSV of llmsim sweep, or a scenario YAML; default: the bundled "
                                   "scenario (llama3-70b on 64 h100-sxm).")


def _plot_module():
    try:
        from llmsim.output import plot
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] != "matplotlib":
            raise
        raise SpecError(MATPLOTLIB_MISSING) from None
    return plot


def _check_output(output: Path) -> None:
    if output.suffix.lower() not in SUFFIXES:
        raise SpecError(f"-o {output}: unknown image format {output.suffix or '(no suffix)'!r}; "
                        f"allowed: {', '.join(SUFFIXES)}")
    if not output.parent.is_dir():
        raise SpecError(f"-o {output}: folder {output.parent} does not exist")


def _write(plot, fig, output: Path) -> None:
    plot.save(fig, output)
    sys.stderr.write(f"llmsim plot: wrote {output}\n")


# --- results CSV ---------------------------------------------------------------------------------------
def load_results(path: Path, numeric: dict[str, str], other: dict[str, str | None] | None = None):
    """Feasible rows of a results CSV, with the named columns checked (option -> column)."""
    import pandas as pd

    if not path.is_file():
        raise SpecError("no such file", file=str(path))
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise SpecError(f"not a CSV file ({err})", file=str(path)) from None
    if "infeasible_reason" in df.columns:
        reason = df["infeasible_reason"]
        df = df[reason.isna() | (reason.astype(str).str.strip() == "")]
    for option, col in {**numeric, **(other or {})}.items():
        if col is not None:
            _check_column(df, path, option, col, numeric=option in numeric)
    df = df.dropna(subset=list(numeric.values()))
    if df.empty:
        raise SpecError(f"no feasible rows with values in {', '.join(numeric.values())}", file=str(path))
    return df.reset_index(drop=True)


def _check_column(df, path: Path, option: str, col: str, numeric: bool) -> None:
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    def ok(c: str) -> bool:
        return not numeric or (is_numeric_dtype(df[c]) and not is_bool_dtype(df[c]))

    from llmsim.output.plot import infer_maximize

    valid = [c for c in df.columns if ok(c)]
    if col in valid:
        return
    if numeric:  # output metrics (with a unit or a direction) before the inputs
        valid.sort(key=lambda c: infer_maximize(c) is None)
    close = difflib.get_close_matches(col, valid, n=3, cutoff=0.6)
    what = f"column {col!r} is not numeric" if col in df.columns else f"no column {col!r}"
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    shown = ", ".join(valid[:12]) + (", ..." if len(valid) > 12 else "")
    raise SpecError(f"{option}: {what}{hint}; {'numeric ' if numeric else ''}columns include: {shown}",
                    file=str(path))


def _front(plot, df, x: str, y: str, x_max: bool | None, y_max: bool | None, path: Path):
    """Non-dominated rows in the plotted plane; the sweep's pareto_rank when a direction is unknown."""
    xm = x_max if x_max is not None else plot.infer_maximize(x)
    ym = y_max if y_max is not None else plot.infer_maximize(y)
    if xm is not None and ym is not None:
        return plot.front_mask(df[x].to_numpy(float), df[y].to_numpy(float), xm, ym), xm
    if "pareto_rank" in df.columns:
        return (df["pareto_rank"] == 0).to_numpy(), bool(xm)
    col, flags = (x, "--x-max or --x-min") if xm is None else (y, "--y-max or --y-min")
    raise SpecError(f"cannot tell whether a larger or a smaller {col} is better: pass {flags}", file=str(path))


def pareto_cmd(
    results: Path = RESULTS, x: str = X, y: str = Y,
    color: str | None = typer.Option(None, "--color", help="Colour points by this column (e.g. accelerator)."),
    logx: bool = LOGX, logy: bool = LOGY, x_max: bool | None = X_MAX, y_max: bool | None = Y_MAX,
    output: Path = OUTPUT,
) -> None:
    """Pareto front of a sweep: y against x, the non-dominated points highlighted and joined."""
    _check_output(output)
    plot = _plot_module()
    df = load_results(results, {"--x": x, "--y": y}, {"--color": color})
    front, xm = _front(plot, df, x, y, x_max, y_max, results)
    title = f"{results.stem}: {plot.axis_label(y)} vs {plot.axis_label(x)}"
    _write(plot, plot.pareto_figure(df, x, y, front, x_max=xm, color=color, logx=logx, logy=logy, title=title),
           output)


def scaling_cmd(
    results: Path = RESULTS, x: str = X, y: str = Y,
    group: str | None = typer.Option(None, "--group", help="One line per value of this column (e.g. tp)."),
    logx: bool = LOGX, logy: bool = LOGY, y_max: bool | None = Y_MAX, output: Path = OUTPUT,
) -> None:
    """Scaling lines: y against x, one line per value of --group (best y where rows share an x)."""
    _check_output(output)
    plot = _plot_module()
    df = load_results(results, {"--x": x, "--y": y}, {"--group": group})
    ym = y_max if y_max is not None else plot.infer_maximize(y) is not False
    title = f"{results.stem}: {plot.axis_label(y)} vs {plot.axis_label(x)}"
    _write(plot, plot.scaling_figure(df, x, y, group, y_max=ym, logx=logx, logy=logy, title=title), output)


def serving_cmd(
    results: Path = RESULTS,
    group: list[str] | None = typer.Option(None, "--group", help="One line per value of these columns "
                                            "(default: those of accelerator, model, tp, pp, dp, engine, scheduler that vary)."),
    slo_tpot_s: float | None = typer.Option(None, "--slo-tpot-s", min=0.0, help="Shade what meets this TPOT."),
    output: Path = OUTPUT,
) -> None:
    """Serving sweep (workload.mode: serving): output tokens/s per device against tokens/s per user, one
    line per system or split, points labelled with the concurrency."""
    _check_output(output)
    _plot_module()
    from llmsim.output.plot_serving import X, Y, serving_figure

    df = load_results(results, {"concurrency": "concurrency", X: X, Y: Y})
    cols = group or [c for c in ("accelerator", "model", "tp", "pp", "dp", "engine", "scheduler")
                     if c in df and df[c].nunique() > 1]
    for c in cols:
        _check_column(df, results, "--group", c, numeric=False)
    fig = serving_figure(df, cols, slo_tpot_s=slo_tpot_s, title=f"{results.stem}: throughput vs interactivity")
    _write(_plot_module(), fig, output)


# --- scenario commands ----------------------------------------------------------------------------------
def _scenario(ctx: typer.Context, args: dict):
    """(path, scenario values) from estimate's flags, as ``llmsim estimate`` resolves them."""
    from llmsim.study import records as est

    args = dict(args)
    path, sets = args.pop("scenario"), args.pop("set_")
    _not_a_sweep_spec(path)
    flags = {k: v.value if isinstance(v, Enum) else v for k, v in args.items()}
    return path, est.load(path, registry(ctx), est.overrides_from_flags(flags, sets))


def _not_a_sweep_spec(path: Path | None) -> None:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return  # the scenario loader reports it, with its line
    if isinstance(data, dict) and "base" in data and ("grid" in data or "zip" in data):
        raise SpecError(f"a sweep spec, not a scenario: run 'llmsim sweep {path} -o results.csv', then plot "
                        "results.csv", file=str(path))


def _scenario_title(sc) -> str:
    from llmsim.engine.split import resolve_split
    from llmsim.study.modes.training import resolve_auto

    sc = resolve_auto(sc)
    w, sp = sc.workload, resolve_split(sc)
    split = f"tp{sp.tp} pp{sp.pp} dp{sp.dp}" + "".join(f" {k}{getattr(sp, k)}" for k in ("cp", "ep")
                                                       if getattr(sp, k) > 1)
    return (f"{sc.names['model']} {w.mode} on {sc.num_devices:,} × {sc.names['accelerator']}, "
            f"{w.precision}, {split}")


def roofline_cmd(ctx: typer.Context, output: Path = OUTPUT, *, scenario_args: dict) -> None:
    """Roofline of the scenario's device with each operator of a layer at its intensity and FLOP/s."""
    from llmsim.study import records as est

    _check_output(output)
    plot = _plot_module()
    path, sc = _scenario(ctx, scenario_args)
    rows = evaluate_point(est.operator_rows, sc, path)
    acc, prec = sc.accelerator, sc.workload.precision
    what = ("one layer: prefill of the batch and one decode step" if sc.workload.mode == "inference"
            else "one layer, forward + backward of a microbatch")
    fig = plot.roofline_figure(rows, acc.peak(prec), acc.hbm_bw_bytes_per_s, precision=prec,
                               title=f"Roofline: {_scenario_title(sc)}\n{what}")
    _write(plot, fig, output)


def breakdown_cmd(
    ctx: typer.Context, output: Path = OUTPUT,
    rows: int = typer.Option(20, "--rows", min=1, help="Plot the first (best-ranked) N rows of a CSV."),
    *, scenario_args: dict,
) -> None:
    """Stacked time breakdown and memory per device: each of the best rows of a CSV, or one scenario."""
    _check_output(output)
    plot = _plot_module()
    source = scenario_args["scenario"]
    if source is not None and source.suffix.lower() == ".csv":
        _no_scenario_flags(scenario_args, source)
        df, capacity, title = _csv_rows(ctx, source, rows)
    else:
        df, capacity, title, source = _scenario_row(ctx, scenario_args)
    _require_breakdown_columns(df, source)
    parts, time_label = time_parts(df)
    fig = plot.breakdown_figure(row_labels(df), parts, time_label, memory_parts(df), capacity, title=title)
    _write(plot, fig, output)


def _csv_rows(ctx: typer.Context, source: Path, rows: int):
    """The first ``rows`` feasible rows (a sweep writes the best first), their HBM capacity and a title."""
    df = load_results(source, {})
    total, df = len(df), df.head(rows)
    first = "best" if "pareto_rank" in df.columns else "first"
    model = "/".join(dict.fromkeys(df["model"].astype(str))) if "model" in df.columns else ""
    shown = f"{first} {len(df)} of {total} rows" if len(df) < total else f"{total} rows"
    title = f"{source.name}: {shown}" + (f" ({model})" if model else "")
    return df, _capacity(ctx, df), title


def _scenario_row(ctx: typer.Context, scenario_args: dict):
    import pandas as pd

    from llmsim.study import records as est

    path, sc = _scenario(ctx, scenario_args)
    df = pd.DataFrame([evaluate_point(est.record, sc, path)])
    return df, [sc.accelerator.hbm_bytes / 1e9], _scenario_title(sc), path or est.DEFAULT_SCENARIO


# --- breakdown data ---------------------------------------------------------------------------------
# legend label -> column; training parts sum to step_time_s (compute_time_s includes the optimizer)
TRAINING_TIME = {"compute": "compute_time_s", "TP comm": "tp_comm_time_s", "CP comm": "cp_comm_time_s",
                 "EP comm": "ep_comm_time_s", "PP send/recv": "pp_comm_time_s",
                 "DP comm (exposed)": "dp_comm_exposed_time_s", "pipeline bubble": "bubble_time_s",
                 "optimizer": "optimizer_time_s", "stragglers": "straggler_time_s",
                 "overhead": "overhead_time_s"}
# inference parts sum to e2e_latency_s: prefill once, decode (output_len - 1) times
INFERENCE_TIME = {"prefill compute": "prefill_compute_time_s", "prefill comm": "prefill_comm_time_s",
                  "decode compute": "decode_compute_time_s", "decode comm": "decode_comm_time_s"}
MEMORY = {"weights": "weights_gb", "gradients": "grads_gb", "optimizer states": "optimizer_gb",
          "KV cache": "kv_cache_gb", "activations": "activations_gb", "reserved": "reserved_gb"}
# input columns that may tell rows apart, with a short prefix for numbers
LABEL_COLUMNS = {"model": "", "accelerator": "", "network": "", "num_devices": "n", "precision": "",
                 "tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "microbatch_size": "mb",
                 "virtual_stages": "v", "recompute": "", "zero_stage": "zero", "seq_len": "seq",
                 "global_batch_size": "gbs", "kv_precision": "kv-", "batch_size": "batch ",
                 "input_len": "in", "output_len": "out"}


def time_parts(df) -> tuple[dict, str]:
    """Stacked time parts of each row and the axis label (training: step; inference: one request)."""
    import numpy as np

    if "prefill_compute_time_s" in df.columns:
        decode_steps = np.maximum(df["output_len"].to_numpy(float) - 1, 0)
        parts = {k: df[c].to_numpy(float) * (decode_steps if k.startswith("decode") else 1)
                 for k, c in INFERENCE_TIME.items()}
        return _nonzero(parts), "request latency: prefill + (output_len - 1) decode steps (s)"
    parts = {k: df[c].to_numpy(float) for k, c in TRAINING_TIME.items() if c in df.columns}
    if "optimizer" in parts:
        parts["compute"] = parts["compute"] - parts["optimizer"]
    return _nonzero(parts), "step time (s)"


def memory_parts(df) -> dict:
    return _nonzero({k: df[c].to_numpy(float) for k, c in MEMORY.items() if c in df.columns})


def _nonzero(parts: dict) -> dict:
    import numpy as np

    return {k: v for k, v in parts.items() if np.nansum(np.abs(v)) > 0}


def row_labels(df) -> list[str]:
    """Label each row by the input columns that differ between rows (one row: its split)."""
    cols = [c for c in LABEL_COLUMNS if c in df.columns]
    varying = [c for c in cols if df[c].astype(str).nunique() > 1]
    if len(df) == 1 or not varying:
        varying = [c for c in ("accelerator", "precision", "tp", "pp", "dp", "cp", "ep") if c in cols]
        varying = [c for c in varying if c not in ("cp", "ep") or str(df[c].iloc[0]) != "1"]
    return [" ".join(f"{LABEL_COLUMNS[c]}{row[c]}" for c in varying) or f"#{i + 1}"
            for i, (_, row) in enumerate(df.iterrows())]


def _no_scenario_flags(args: dict, source: Path) -> None:
    given = [k for k, v in args.items() if k != "scenario" and v not in (None, [], ())]
    if given:
        flag = "--" + given[0].rstrip("_").replace("_", "-")
        raise SpecError(f"{flag} applies to a scenario, not to a results CSV", file=str(source))


def _require_breakdown_columns(df, source: Path) -> None:
    needed = (["prefill_compute_time_s", "output_len"] if "prefill_compute_time_s" in df.columns
              else ["compute_time_s", "weights_gb"])
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise SpecError(f"no column {missing[0]!r}: not llmsim results (need the time breakdown columns, "
                        f"e.g. compute_time_s or prefill_compute_time_s)", file=str(source))


def _capacity(ctx: typer.Context, df) -> list[float | None]:
    """HBM capacity (GB) of each row's accelerator preset; None for a derived or unknown device."""
    reg, found = registry(ctx), {}
    names = df["accelerator"].astype(str).tolist() if "accelerator" in df.columns else [""] * len(df)
    for name in dict.fromkeys(names):
        try:
            found[name] = reg.get("accelerators", name).hbm_capacity_gb
        except SpecError:
            found[name] = None
    return [found[n] for n in names]


# --- assembly ------------------------------------------------------------------------------------------
def with_scenario_flags(cmd, estimate_cmd, scenario_argument=None):
    """``cmd`` as a typer command taking estimate's scenario flags, passed to it as ``scenario_args``."""
    borrowed = {n: p for n, p in inspect.signature(estimate_cmd, eval_str=True).parameters.items()
                if n not in NOT_SCENARIO_FLAGS}
    if scenario_argument is not None:
        borrowed["scenario"] = borrowed["scenario"].replace(default=scenario_argument)
    own = [p for n, p in inspect.signature(cmd, eval_str=True).parameters.items() if n != "scenario_args"]
    params = [own[0], *borrowed.values(), *own[1:]]  # ctx, [SCENARIO], estimate's flags, the command's own

    def command(**kwargs):
        return cmd(**{k: v for k, v in kwargs.items() if k not in borrowed},
                   scenario_args={k: kwargs[k] for k in borrowed})

    command.__name__, command.__doc__ = cmd.__name__, cmd.__doc__
    command.__signature__ = inspect.Signature(
        [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params])
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def make_plot_app(estimate_cmd) -> typer.Typer:
    """The ``llmsim plot`` sub-app; roofline and breakdown take the flags of ``estimate_cmd``."""
    plot_app = typer.Typer(help="Figures (PNG or SVG by the -o suffix) of sweep results and scenarios; "
                                "needs matplotlib: pip install 'llmsim\\[plot]'.", no_args_is_help=True)
    plot_app.command("pareto")(pareto_cmd)
    plot_app.command("roofline")(with_scenario_flags(roofline_cmd, estimate_cmd))
    plot_app.command("breakdown")(with_scenario_flags(breakdown_cmd, estimate_cmd, SOURCE))
    plot_app.command("scaling")(scaling_cmd)
    plot_app.command("serving")(serving_cmd)
    return plot_app
