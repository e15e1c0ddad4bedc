"""Derive the GEMM shape model's constants from GEMMs timed back to back on an H200.

    python benchmarks/kernels/fit_gemm_shape.py [--csv benchmarks/kernels/h200/steady_gemm.csv]

The model (llmsim/engine/gemm_shape.py) times a GEMM, or a grouped GEMM of G groups, as

    t = GEMM_FIXED_S + (t_c^p + t_m^p)^(1/p),  p = GEMM_BLEND_POWER
    t_c = 2 * G * max(T_r, M + T_r/2) * ceil(N/T_c) T_c * K / rate   (tiles: GEMM_TILE_ROWS x GEMM_TILE_COLS)
    t_m = bytes / (HBM bandwidth x HBM_EFFICIENCY)

with ``rate`` the device's measured large-GEMM rate (MAMF). Tiles are quantised, waves are not: cuBLAS's
heuristics and stream-K kernels spread a last partial wave over the SMs (Osama et al. 2023, arXiv
2301.03598). Variants with 64- and 128-row tiles and with waves quantised on the 132 SMs are fitted and
printed too (calibration.py says why the 16-row tile was chosen). The fit: least squares
on log(predicted / measured) over the dense bf16 and fp8 (cuBLAS) and grouped bf16 (CUTLASS) kernels, with
one free rate scale per kernel class (so the shape constants do not depend on how close to MAMF each class
runs). torch's row-wise-scaled grouped fp8 kernel is shown but not fitted: its rate depends on the shape in
ways the production kernels (DeepGEMM, Transformer Engine) do not share.

Prints the constants as llmsim/engine/calibration.py holds them, and the error of the model and of the rule it
replaced (MAMF x d / (d + 64), d = min(M, N, K)). tests/test_gemm_shape.py checks that this script reproduces
the constants.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from llmsim.engine import calibration as cal
from llmsim.engine import gemm_shape

HERE = Path(__file__).parent
SMS = 132  # H200 SXM: 132 SMs (torch.cuda.get_device_properties, env-steady.json)
MAMF = {"bf16": 794.5e12, "fp8": 1453.4e12}  # presets/accelerators/h200-sxm.yaml measured_matmul_tflops
HBM = 4.8e12 * 0.85  # h200-sxm hbm_bandwidth_tb_per_s x calibration.HBM_EFFICIENCY
TILE_ROWS, TILE_COLS = 16, 128  # calibration.GEMM_TILE_ROWS, GEMM_TILE_COLS (sources there)
FITTED = ("dense-bf16", "dense-fp8", "grouped-bf16")


@contextmanager
def _tiles(rows: int):
    old = cal.GEMM_TILE_ROWS, cal.GEMM_TILE_COLS
    cal.GEMM_TILE_ROWS, cal.GEMM_TILE_COLS = rows, TILE_COLS
    try:
        yield
    finally:
        cal.GEMM_TILE_ROWS, cal.GEMM_TILE_COLS = old


def load(path: Path) -> pd.DataFrame:
    d = pd.read_csv(path)
    d = d[d["error"].isna()].copy() if "error" in d else d
    d["cls"] = np.where(d["family"] == "dense", "dense", "grouped") + "-" + d["dtype"]
    return d


def predict(d: pd.DataFrame, fixed_s: float, power: float, scale: dict[str, float], waves: bool = False,
            rows: int = TILE_ROWS):
    m, n, k, g = (d[c].to_numpy(float) for c in ("m", "n", "k", "groups"))
    wb = d["dtype"].map({"bf16": 2.0, "fp8": 1.0}).to_numpy()
    rate = d["dtype"].map(MAMF).to_numpy() * d["cls"].map(scale).to_numpy()
    if waves:  # whole tiles on whole waves of the SMs
        tiles = np.ceil(g * np.ceil(m / rows) * np.ceil(n / TILE_COLS) / SMS) * SMS
        t_c = tiles * 2.0 * rows * TILE_COLS * k / rate
    else:  # the engine's rule (llmsim/engine/gemm_shape.py), at these tiles
        with _tiles(rows):
            t_c = 2.0 * g * m * n * k * gemm_shape.tile_factor(m, n) / rate
    t_m = g * (m * k * wb + n * k * wb + m * n * 2.0) / HBM
    return fixed_s + (t_c**power + t_m**power) ** (1.0 / power)


def fit(d: pd.DataFrame, waves: bool = False, rows: int = TILE_ROWS, power: float | None = None, old: bool = False):
    """(fixed time, blend power, rate scale per class) fitted on the FITTED classes; ``power`` fixed if given;
    ``old``: the rule replaced, with a fixed time and rate scales fitted too (a fair comparison)."""
    sub = d[d["cls"].isin(FITTED)]
    y = sub["time_s"].to_numpy()

    def unpack(x):
        return x[0] * 1e-6, (power if power is not None else x[1]), dict(zip(FITTED, x[2:]))

    def resid(x):
        fixed_s, pw, scale = unpack(x)
        pred = old_rule(sub, fixed_s, scale) if old else predict(sub, fixed_s, pw, scale, waves, rows)
        return np.log(pred / y)

    sol = least_squares(resid, [4.0, 2.0, 1.0, 1.0, 1.0], bounds=([0, 1, 0.3, 0.3, 0.3], [100, 20, 1.5, 1.5, 1.5]))
    return unpack(sol.x)


def old_rule(d: pd.DataFrame, fixed_s: float = 0.0, scale: dict[str, float] | None = None):
    m, n, k, g = (d[c].to_numpy(float) for c in ("m", "n", "k", "groups"))
    wb = d["dtype"].map({"bf16": 2.0, "fp8": 1.0}).to_numpy()
    dmin = np.minimum(np.minimum(m, n), k)
    rate = d["dtype"].map(MAMF).to_numpy() * (1.0 if scale is None else d["cls"].map(scale).to_numpy())
    t_c = 2.0 * g * m * n * k / (rate * dmin / (dmin + 64))
    return fixed_s + np.maximum(t_c, g * (m * k * wb + n * k * wb + m * n * 2.0) / HBM)


def error_table(d: pd.DataFrame, pred, label: str) -> str:
    r = np.log(d["time_s"].to_numpy() / pred)
    lines = [f"{label}:"]
    for cls, idx in d.groupby("cls").groups.items():
        x = r[d.index.get_indexer(idx)]
        lines.append(f"  {cls:13s} {len(x):4d} kernels: measured/model geo-mean {np.exp(x.mean()):.2f}, "
                     f"mean |error| {np.exp(np.abs(x)).mean() - 1:6.1%}")
    for lo, hi in ((0, 64), (64, 512), (512, 4096), (4096, np.inf)):
        sel = ((d["m"] >= lo) & (d["m"] < hi) & d["cls"].isin(FITTED)).to_numpy()
        lines.append(f"  M in [{lo}, {hi}): mean |error| {np.exp(np.abs(r[sel])).mean() - 1:6.1%} (fitted classes)")
    return "\n".join(lines)


def wgrad_depth(backward: pd.DataFrame, fixed_s: float, power: float, scale: dict[str, float], depth=None,
                family: str = "grouped"):
    """(rows of reduction a weight-gradient tile's fixed work is worth, log errors, classes) over the grouped
    (``family`` "grouped") or dense weight gradients of ``backward`` (backward_gemm.csv), the engine's rule
    (gemm_shape.wgrad_depth_factor) at the constants given; ``depth`` fixed if given."""
    w = backward[(backward["pass"] == "wgrad") & backward["error"].isna()
                 & (backward["family"].str.startswith("grouped") == (family == "grouped"))]
    m, n, k, g = (w[c].to_numpy(float) for c in ("m", "n", "k", "groups"))
    cls = np.where(w["family"] == "dense", "dense-bf16", "grouped-bf16")
    rate = MAMF["bf16"] * np.array([scale[c] for c in cls])
    t_m = g * (m * n * 2.0 + m * k * 2.0 + n * k * 2.0) / HBM
    y = w["time_s"].to_numpy()

    def resid(d):
        old = cal.WGRAD_TILE_DEPTH
        cal.WGRAD_TILE_DEPTH = float(d)
        try:
            t_c = 2.0 * g * m * n * k * gemm_shape.tile_factor(n, k) * gemm_shape.wgrad_depth_factor(m) / rate
        finally:
            cal.WGRAD_TILE_DEPTH = old
        return np.log((fixed_s + (t_c**power + t_m**power) ** (1.0 / power)) / y)

    if depth is None:
        depth = float(least_squares(lambda x: resid(x[0]), [100.0], bounds=([0.0], [5000.0])).x[0])
    return depth, resid(depth), cls


def dgrad_errors(backward: pd.DataFrame, fixed_s: float, power: float, scale: dict[str, float]):
    """(log errors model / measured, classes) of the input-gradient GEMMs of ``backward``: the engine's rule,
    output tiles M x K, the forward's FLOPs and bytes."""
    d = backward[(backward["pass"] == "dgrad") & backward["error"].isna()]
    m, n, k, g = (d[c].to_numpy(float) for c in ("m", "n", "k", "groups"))
    cls = np.where(d["family"] == "dense", "dense-bf16", "grouped-bf16")
    rate = MAMF["bf16"] * np.array([scale[c] for c in cls])
    t_c = 2.0 * g * m * n * k * gemm_shape.tile_factor(m, k) / rate
    t_m = g * (m * n * 2.0 + m * k * 2.0 + n * k * 2.0) / HBM
    return np.log((fixed_s + (t_c**power + t_m**power) ** (1.0 / power)) / d["time_s"].to_numpy()), cls


def constants(path: Path) -> dict[str, float]:
    """The constants as calibration.py holds them: 2 significant digits (the weight-gradient depth fitted at the
    rounded fixed time and power, on backward_gemm.csv beside ``path``)."""
    fixed_s, power, scale = fit(load(path))
    out = {"GEMM_FIXED_S": float(f"{fixed_s:.2g}"), "GEMM_BLEND_POWER": float(f"{power:.2g}")}
    depth, _, _ = wgrad_depth(pd.read_csv(path.parent / "backward_gemm.csv"), out["GEMM_FIXED_S"],
                              out["GEMM_BLEND_POWER"], scale)
    return {**out, "WGRAD_TILE_DEPTH": float(f"{depth:.2g}")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=HERE / "h200" / "steady_gemm.csv")
    args = ap.parse_args()
    d = load(args.csv).reset_index(drop=True)
    fixed_s, power, scale = fit(d)
    print(f"fit over {d['cls'].isin(FITTED).sum()} kernels: fixed {fixed_s * 1e6:.2f} us, blend power {power:.3f}, "
          "rate / MAMF " + ", ".join(f"{k} {v:.3f}" for k, v in scale.items()))
    scale_all = {**scale, "grouped-fp8": scale["dense-fp8"]}
    print(error_table(d, predict(d, fixed_s, power, scale_all), "tile-quantised model (grouped fp8 at the dense fp8 rate)"))
    for rows, waves in ((TILE_ROWS, True), (64, False), (64, True), (128, False), (128, True)):
        wf, wp, ws = fit(d, waves, rows)
        print(error_table(d, predict(d, wf, wp, {**ws, "grouped-fp8": ws["dense-fp8"]}, waves, rows),
                          f"variant: {rows}-row tiles, waves {'quantised on ' + str(SMS) + ' SMs' if waves else 'not quantised'}"
                          f" (fixed {wf * 1e6:.2f} us, power {wp:.2f})"))
    hf, hp, hs = fit(d, power=50.0)
    print(error_table(d, predict(d, hf, hp, {**hs, "grouped-fp8": hs["dense-fp8"]}),
                      f"variant: no blend, the larger of compute and memory (power 50; fixed {hf * 1e6:.2f} us)"))
    print(error_table(d, old_rule(d), "rule replaced: MAMF x d/(d+64), max(compute, memory), no fixed time"))
    of, _, os_ = fit(d, old=True)
    print(error_table(d, old_rule(d, of, {**os_, "grouped-fp8": os_["dense-fp8"]}),
                      f"rule replaced, with a fixed time ({of * 1e6:.2f} us) and rate scales fitted as above"))
    c = constants(args.csv)
    back = pd.read_csv(args.csv.parent / "backward_gemm.csv")
    for family in ("grouped", "dense"):
        for label, depth in (("fitted", None), ("none", 0.0)):
            dep, r, _ = wgrad_depth(back, c["GEMM_FIXED_S"], c["GEMM_BLEND_POWER"], scale, depth, family)
            print(f"{family} weight-gradient GEMMs ({len(r)}), tile depth {label} ({dep:.0f} rows): mean |error| "
                  f"{np.exp(np.abs(r)).mean() - 1:.1%}, model / measured geo-mean {np.exp(r.mean()):.2f}")
    r, cls = dgrad_errors(back, c["GEMM_FIXED_S"], c["GEMM_BLEND_POWER"], scale)
    for k in ("dense-bf16", "grouped-bf16"):
        x = r[cls == k]
        print(f"{k} input-gradient GEMMs ({len(x)}): mean |error| {np.exp(np.abs(x)).mean() - 1:.1%}, "
              f"model / measured geo-mean {np.exp(x.mean()):.2f}")
    print("constants:", c)
    repeat = HERE / "h200" / "steady_gemm_repeat.csv"
    if args.csv == HERE / "h200" / "steady_gemm.csv" and repeat.exists():
        rf, rp, rs = fit(load(repeat).reset_index(drop=True))
        print(f"repeat run (clocks warmed 2 s, median of 5 timings): fixed {rf * 1e6:.2f} us, blend power {rp:.3f}, "
              "rate / MAMF " + ", ".join(f"{k} {v:.3f}" for k, v in rs.items()))


if __name__ == "__main__":
    main()
