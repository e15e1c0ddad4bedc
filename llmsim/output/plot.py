"""Figures of llmsim results: Pareto front, roofline, time and memory breakdown, scaling lines.

Pure functions: they take records (a pandas DataFrame or operator rows) and return a matplotlib
``Figure``, drawn without pyplot on the non-interactive Agg canvas, so nothing global changes and
no display is needed. ``save`` writes PNG or SVG atomically. matplotlib is the ``plot`` extra: this
module imports it, the CLI imports this module only when a plot is asked for.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from llmsim import schema
from llmsim.atomic import atomic_file

ACRONYMS = {"mfu", "ttft", "tpot", "e2e", "kv", "tp", "pp", "dp", "cp", "ep", "hbm", "gpus", "usd"}
# column suffix -> unit, longest first (e.g. "_per_s" before "_s")
UNITS = (("_flop_per_byte", "FLOP/byte"), ("_usd", "USD"), ("_gb_s", "GB/s"), ("_gb", "GB"),
         ("_ms", "ms"), ("_j", "J"), ("_w", "W"), ("_s", "s"))
PER_SECOND = re.compile(r"_per_s(?=_|$)")  # tokens_per_s, tokens_per_s_per_device; not layers_per_stage
FRONT_COLOR, FADED = "#1f3b73", "#9a9a9a"
PHASE_MARKERS = {"layer fwd+bwd": "o", "prefill": "s", "decode step": "^"}


# --- labels and directions ----------------------------------------------------------------------
def _words(name: str) -> str:
    return " ".join(w.upper() if w in ACRONYMS else w for w in name.split("_") if w)


def axis_label(col: str) -> str:
    """A readable axis label with its unit: a declared column's label and unit (``llmsim columns``:
    ``throughput_tokens_per_s_per_device`` -> "throughput (tokens/s per device)"); any other column's
    (a grid key's, a ``collective`` or ``--ops`` CSV's) from its name and the unit its suffix names
    (``busbw_gb_s`` -> "busbw (GB/s)")."""
    declared = schema.get(col)
    if declared is not None:
        return declared.axis_label
    if PER_SECOND.search(col):
        base, per = PER_SECOND.split(col, maxsplit=1)
        *head, thing = base.split("_")
        rate = f"{_words(thing)}/s" + (f" {_words(per)}" if per else "")
        return f"{_words('_'.join(head))} ({rate})" if head else rate
    for suffix, unit in UNITS:
        if col.endswith(suffix) and len(col) > len(suffix):
            name = col[: -len(suffix)]
            name = name[: -len("_time")] + " time" if name.endswith("_time") else name
            return f"{_words(name)} ({unit})"
    return _words(col)


def infer_maximize(col: str) -> bool | None:
    """True if larger is better (throughput, MFU), False if smaller is (cost, time, memory), as the output
    schema declares it (``llmsim columns``); None for an input or a column it does not declare."""
    return schema.maximize(col)


def front_mask(x: np.ndarray, y: np.ndarray, x_max: bool, y_max: bool) -> np.ndarray:
    """Rows not dominated in the (x, y) plane."""
    from llmsim.study.pareto import pareto_rank

    return pareto_rank(np.column_stack([x, y]), [x_max, y_max]) == 0


# --- shared drawing helpers -----------------------------------------------------------------------
def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _axes_style(ax, x: str, y: str, logx: bool, logy: bool) -> None:
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)


def _big_numbers(ax, xs, ys) -> None:
    """Linear axes of large values read 250k, 1.5M instead of carrying a separate 1e6 multiplier."""
    from matplotlib.ticker import EngFormatter

    for axis, values, scale in ((ax.xaxis, xs, ax.get_xscale()), (ax.yaxis, ys, ax.get_yscale())):
        if scale == "linear" and np.nanmax(np.abs(np.asarray(values, dtype=float))) >= 1e4:
            axis.set_major_formatter(EngFormatter(sep=""))


def _data_ticks(ax, values, log: bool) -> None:
    """On a log axis with few distinct values (device counts, batch sizes), tick exactly at them."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    uniq = np.unique(np.asarray(values, dtype=float))
    if log and 1 < len(uniq) <= 12 and np.all(uniq == np.round(uniq)):
        ax.xaxis.set_major_locator(FixedLocator(uniq))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


def _outside_legend(ax, **kw):
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=9, **kw)


def _categories(values) -> list:
    uniq = list(dict.fromkeys(values))
    try:
        return sorted(uniq)
    except TypeError:
        return uniq


def _is_categorical(values) -> bool:
    arr = np.asarray(values)
    return arr.dtype.kind not in "if" or len(np.unique(arr)) <= 10


def _palette(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _header(text: str) -> Line2D:
    """An invisible legend handle: its label reads as a section heading."""
    return Line2D([], [], linestyle="none", label=text)


# --- Pareto front --------------------------------------------------------------------------------
def pareto_figure(df, x: str, y: str, front, *, x_max: bool | None, color: str | None = None,
                  logx: bool = False, logy: bool = False, title: str = "") -> Figure:
    """Every row as a point; the front (boolean mask) highlighted and joined by a staircase."""
    front = np.asarray(front, dtype=bool)
    fig = _figure(9.0, 5.5)
    ax = fig.add_subplot()
    xs, ys = df[x].to_numpy(float), df[y].to_numpy(float)
    handles = _pareto_points(fig, ax, df, xs, ys, front, color)
    order = np.argsort(xs[front], kind="stable")
    where = "pre" if x_max else "post"
    (line,) = ax.step(xs[front][order], ys[front][order], where=where, color="black", lw=1.2, zorder=2,
                      label=f"Pareto front ({front.sum()} of {len(xs)} points)")
    handles.insert(0, line)
    handles.append(Line2D([], [], marker="o", linestyle="none", color=FADED, alpha=0.45, label="dominated"))
    _axes_style(ax, x, y, logx, logy)
    _big_numbers(ax, xs, ys)
    if len(fig.axes) > 1:  # a colour bar holds the right side: the legend goes below
        fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9)
    else:
        _outside_legend(ax, handles=handles)
    ax.set_title(title or f"{axis_label(y)} vs {axis_label(x)}")
    return fig


def _pareto_points(fig, ax, df, xs, ys, front, color: str | None) -> list:
    """Scatter dominated points faded and front points bold; the legend handles of the colours."""
    back = dict(s=22, alpha=0.3, linewidths=0, zorder=1)
    top = dict(s=60, edgecolors="black", linewidths=0.8, zorder=3)
    if color is None:
        ax.scatter(xs[~front], ys[~front], color=FADED, **back)
        ax.scatter(xs[front], ys[front], color=FRONT_COLOR, **top)
        return []
    values = df[color].to_numpy()
    if not _is_categorical(values):
        vals = values.astype(float)
        norm = dict(cmap="viridis", vmin=np.nanmin(vals), vmax=np.nanmax(vals))
        ax.scatter(xs[~front], ys[~front], c=vals[~front], **norm, **back)
        opaque = ax.scatter(xs[front], ys[front], c=vals[front], **norm, **top)
        fig.colorbar(opaque, ax=ax, label=axis_label(color), pad=0.01)
        return []
    handles = [_header(_words(color))]
    for cat, col in zip(cats := _categories(values), _palette(len(cats)), strict=True):
        sel = values == cat
        ax.scatter(xs[sel & ~front], ys[sel & ~front], color=col, **back)
        ax.scatter(xs[sel & front], ys[sel & front], color=col, **top)
        handles.append(Line2D([], [], marker="o", linestyle="none", color=col, markeredgecolor="black",
                              label=str(cat)))
    return handles


# --- scaling lines ---------------------------------------------------------------------------------
def scaling_figure(df, x: str, y: str, group: str | None = None, *, y_max: bool = True,
                   logx: bool = False, logy: bool = False, title: str = "") -> Figure:
    """One line per value of ``group``; where several rows share an x, the best y (``y_max``) is drawn."""
    fig = _figure(9.0, 5.5)
    ax = fig.add_subplot()
    groups = _categories(df[group].to_numpy()) if group else [None]
    several = False
    for g, col in zip(groups, _palette(len(groups)), strict=True):
        sub = df if g is None else df[df[group] == g]
        best = sub.groupby(x)[y].max() if y_max else sub.groupby(x)[y].min()
        several |= len(best) < len(sub)
        ax.plot(best.index.to_numpy(float), best.to_numpy(float), marker="o", color=col, lw=1.8,
                label=f"{g}" if g is not None else axis_label(y))
    _axes_style(ax, x, y, logx, logy)
    _big_numbers(ax, df[x], df[y])
    _data_ticks(ax, df[x].to_numpy(), logx)
    if group:
        _outside_legend(ax, title=_words(group))
    note = " (best row at each x)" if several else ""
    ax.set_title((title or f"{axis_label(y)} vs {axis_label(x)}") + note)
    return fig


# --- roofline ----------------------------------------------------------------------------------------
def roofline_figure(ops: list[dict], peak_flops: float, hbm_bw: float, *, precision: str,
                    title: str = "") -> Figure:
    """The device roofline (log-log) with each operator at its intensity and achieved FLOP/s.

    ``ops``: rows of ``llmsim.study.records.operator_rows`` (phase, op, flops, bytes, time_s). Operators
    without FLOPs (norms, residuals, activations) and network rows have no place on a log axis; the
    legend lists them.
    """
    shown = [r for r in ops if r["flops"] > 0 and r["bytes"] > 0 and r["time_s"] > 0]
    hidden = list(dict.fromkeys(("network: " if r.get("bound") == "network" else "") + r["op"]
                                for r in ops if r not in shown))
    fig = _figure(9.5, 5.8)
    ax = fig.add_subplot()
    ridge = peak_flops / hbm_bw
    intensity = np.array([r["flops"] / r["bytes"] for r in shown] or [ridge])
    achieved = np.array([r["flops"] / r["time_s"] for r in shown] or [peak_flops])
    lo = 10 ** math.floor(math.log10(min(intensity.min(), ridge) / 3))
    hi = 10 ** math.ceil(math.log10(max(intensity.max(), ridge) * 3))
    xs = np.logspace(math.log10(lo), math.log10(hi), 200)
    ax.plot(xs, np.minimum(peak_flops, hbm_bw * xs) / 1e12, color="black", lw=2, zorder=2)
    ax.axvline(ridge, color="black", ls=":", lw=1, zorder=1)
    ax.annotate(f"peak {peak_flops / 1e12:,.0f} TFLOP/s ({precision})", (hi, peak_flops / 1e12),
                xytext=(-4, 5), textcoords="offset points", ha="right", va="bottom", fontsize=9)
    slope = np.degrees(np.arctan2(hbm_bw / 1e12, 1.0))  # y = bw x in TFLOP/s: a straight line on log-log
    ax.text(lo * 1.5, hbm_bw * lo * 1.5 * 1.25 / 1e12, f"HBM {hbm_bw / 1e12:.2f} TB/s", rotation=slope,
            transform_rotates_text=True, rotation_mode="anchor", ha="left", va="bottom", fontsize=9)
    ax.text(ridge * 1.08, 0.02, f"ridge {ridge:,.0f} FLOP/byte", transform=ax.get_xaxis_transform(),
            ha="left", va="bottom", fontsize=8)
    handles = _roofline_points(ax, shown)
    if hidden:
        handles += [_header(""), _header("not shown (no FLOPs counted):"),
                    *(_header(f"  {n}") for n in hidden)]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    bottom = min(hbm_bw * lo, achieved.min() / 2) / 1e12
    ax.set_ylim(10 ** math.floor(math.log10(bottom)), peak_flops * 3 / 1e12)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved (TFLOP/s per device)")
    ax.grid(True, which="major", alpha=0.3)
    _outside_legend(ax, handles=handles)
    ax.set_title(title or "Roofline")
    return fig


def _roofline_points(ax, rows: list[dict]) -> list:
    names = list(dict.fromkeys(r["op"] for r in rows))
    phases = list(dict.fromkeys(r["phase"] for r in rows))
    colors = dict(zip(names, _palette(len(names)), strict=True))
    for r in rows:
        ax.scatter(r["flops"] / r["bytes"], r["flops"] / r["time_s"] / 1e12, s=70, zorder=3, alpha=0.85,
                   color=colors[r["op"]], marker=PHASE_MARKERS.get(r["phase"], "o"), edgecolors="black",
                   linewidths=0.6)
    handles = [_header("operator")]
    handles += [Line2D([], [], marker="o", linestyle="none", color=colors[n], markeredgecolor="black",
                       label=n) for n in names]
    if len(phases) > 1:
        handles += [_header(""), _header("phase")]
        handles += [Line2D([], [], marker=PHASE_MARKERS.get(p, "o"), linestyle="none", color="white",
                           markeredgecolor="black", label=p) for p in phases]
    return handles


# --- time and memory breakdown ------------------------------------------------------------------------
def breakdown_figure(labels: list[str], time_parts: dict, time_label: str, memory_parts: dict,
                     capacity_gb: list[float | None], *, title: str = "") -> Figure:
    """Stacked horizontal bars, one per row: time parts (left) and memory per device (right).

    ``time_parts`` / ``memory_parts``: legend label -> array of one value per row, stacked in order;
    ``capacity_gb``: the device's HBM per row (None where unknown), drawn as a red tick.
    """
    n = len(labels)
    # the row labels take the figure's left margin: widen it for labels past ~40 characters
    extra_in = 0.085 * max(0, max((len(x) for x in labels), default=0) - 40)
    fig = _figure(13.0 + extra_in, max(3.2, 0.38 * n + 2.6))
    ax_t, ax_m = fig.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    pos = np.arange(n)
    _stack(ax_t, pos, time_parts)
    _stack(ax_m, pos, memory_parts)
    caps = [c for c in capacity_gb if c is not None]
    if caps:
        segs = [((c, p - 0.45), (c, p + 0.45)) for p, c in zip(pos, capacity_gb, strict=True) if c is not None]
        from matplotlib.collections import LineCollection

        ax_m.add_collection(LineCollection(segs, colors="#d62728", linewidths=2.2, zorder=4,
                                           label=f"HBM capacity ({_caps_text(caps)})"))
        ax_m.set_xlim(0, max(max(caps), _total(memory_parts).max()) * 1.08)
    ax_t.set_yticks(pos, labels)
    ax_t.invert_yaxis()
    ax_t.set_xlabel(time_label)
    ax_m.set_xlabel("memory per device (GB)")
    for ax, ncol in ((ax_t, 3), (ax_m, 2)):  # the memory panel is narrower: two columns fit inside it
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.01), ncol=ncol, fontsize=8.5, frameon=False,
                  borderaxespad=0.0)
    if title:
        fig.suptitle(title)
    return fig


# one colour per part, the same in every figure
PART_COLORS = {"compute": "#1f77b4", "prefill compute": "#1f77b4", "decode compute": "#aec7e8",
               "TP comm": "#ff7f0e", "prefill comm": "#ff7f0e", "decode comm": "#ffbb78", "CP comm": "#bcbd22",
               "EP comm": "#d62728", "PP send/recv": "#17becf", "DP comm (exposed)": "#8c564b",
               "pipeline bubble": "#e377c2", "optimizer": "#2ca02c", "stragglers": "#9467bd", "overhead": "#7f7f7f",
               "weights": "#1b9e77", "gradients": "#66c2a5", "optimizer states": "#a6d854",
               "KV cache": "#e6ab02", "activations": "#7570b3", "reserved": "#bdbdbd"}


def _stack(ax, pos, parts: dict) -> None:
    left = np.zeros(len(pos))
    for name, values in parts.items():
        values = np.nan_to_num(np.asarray(values, dtype=float))
        ax.barh(pos, values, left=left, height=0.7 if len(pos) > 1 else 0.5, color=PART_COLORS.get(name),
                label=name, edgecolor="white", linewidth=0.4)
        left += values


def _total(parts: dict) -> np.ndarray:
    return np.sum([np.nan_to_num(np.asarray(v, dtype=float)) for v in parts.values()], axis=0)


def _caps_text(caps: list[float]) -> str:
    uniq = sorted({round(c) for c in caps})
    return f"{uniq[0]:,} GB" if len(uniq) == 1 else ", ".join(f"{c:,}" for c in uniq) + " GB"


# --- output ------------------------------------------------------------------------------------------
def save(fig: Figure, path: str | Path) -> None:
    """Write ``fig`` as PNG or SVG (by suffix), atomically."""
    fmt = Path(path).suffix.lower().lstrip(".")
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=150, metadata={"Date": None} if fmt == "svg" else {})
