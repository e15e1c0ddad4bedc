"""Throughput per device against interactivity (tokens/s per user) of serving sweeps: the chart serving
comparisons publish (one line per system or split, points at rising concurrency)."""

from __future__ import annotations

from matplotlib.figure import Figure

from llmsim.output.plot import _axes_style, _figure, _outside_legend, _palette, _words

X, Y = "tokens_per_s_per_user", "throughput_tokens_per_s_per_device"


def serving_figure(df, group: list[str], *, slo_tpot_s: float | None = None, title: str = "") -> Figure:
    """One line per distinct value of the ``group`` columns through its rows ordered by concurrency,
    each point labelled with its concurrency; with ``slo_tpot_s`` the interactivity the SLO asks for
    (tokens/s per user >= 1 / TPOT bound) is shaded."""
    fig = _figure(9.5, 5.8)
    ax = fig.add_subplot()
    names = df[group].astype(str).agg(" ".join, axis=1) if group else None
    keys = sorted(set(names)) if group else ["all rows"]
    for label, color in zip(keys, _palette(len(keys)), strict=True):
        sub = (df if names is None else df[names == label]).sort_values("concurrency")
        ax.plot(sub[X].to_numpy(float), sub[Y].to_numpy(float), marker="o", lw=1.8, color=color, label=label)
        labels: dict = {}  # concurrencies that land on one point (past the running limit) share a label
        for x, y, c in zip(sub[X], sub[Y], sub["concurrency"], strict=True):
            labels.setdefault((round(float(x), 9), round(float(y), 9)), []).append(str(int(c)))
        for (x, y), cs in labels.items():
            ax.annotate(", ".join(cs), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
    if slo_tpot_s:
        ax.axvspan(1.0 / slo_tpot_s, ax.get_xlim()[1], color="#2ca02c", alpha=0.08,
                   label=f"meets TPOT <= {slo_tpot_s * 1e3:g} ms")
    _axes_style(ax, X, Y, False, False)
    _outside_legend(ax, title=" ".join(_words(g) for g in group) if group else None)
    ax.set_title(title or "throughput per device vs interactivity (labels: requests in flight)")
    return fig
