"""Fitting the few constants that no measurement gives (``engine.calibration.FITTED``), and
leave-one-source-out cross-validation, the error llmsim quotes as its accuracy.

The fit is least squares on the log error, log(predicted / measured), of every converted record of the
calibration set whose kind is fitted (training throughput, serving throughput and first-token latency
alike; the 2025-2026 serving records are scored, not fitted: ``runs.SERVING_2026``), within each
constant's physical bounds (scipy.optimize.least_squares, trust-region reflective), from each constant's
declared start. The loss is robust (soft L1 beyond ``LOSS_SCALE``): the set holds records whose physics
llmsim does not model yet (e.g. MoE serving in TensorRT-LLM v0.9), and a squared loss would let them drag
the global constants. Fitted values are rounded to ``DIGITS`` significant digits, so that the same data
gives the same file on any machine.
Cross-validation refits on all sources but one, starting from the full fit, and predicts the source
left out; a source is one publication or benchmark table (``records.SOURCES``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from llmsim.atomic import atomic_file
from llmsim.engine import calibration as cal
from llmsim.engine.errors import DesignError
from llmsim.validation.records import DATA, DECODE_DATA, RECIPES, SERVING_DATA
from llmsim.validation.runs import Case, forget_serving_rows
from llmsim.validation.serving_2026 import DATA as SERVING_2026_DATA

DIGITS = 4
FILE_VERSION = 1
# fitted constants that only the compute model reads (engine/compute.py), never the network's collectives
COMPUTE_ONLY = frozenset({"KERNEL_EFFICIENCY", "KERNEL_OVERHEAD_S", "INFERENCE_KERNEL_OVERHEAD_S"})
LOSS_SCALE = 0.1  # log error (about 10%) beyond which a record counts linearly, not quadratically
TOLERANCE = 1e-5  # relative change of the constants (on their bounds' scale) or of the cost that ends a fit


@contextmanager
def constants(values: dict[str, float]) -> Iterator[None]:
    """The engine evaluated with ``values`` for the fitted constants (restored afterwards)."""
    from llmsim.engine.network import clear_caches

    old = {k: getattr(cal, k) for k in values}
    # no remembered result may outlive the constants it was computed with; the network's caches (collective
    # times, paths) read only the network constants, so a change of the compute ones keeps them
    network = any(k not in COMPUTE_ONLY for k in values)
    try:
        for k, v in values.items():
            setattr(cal, k, float(v))
        if network:
            clear_caches()
        yield
    finally:
        for k, v in old.items():
            setattr(cal, k, v)
        if network:
            clear_caches()


def predictions(items: list[Case], values: dict[str, float]) -> np.ndarray:
    """Predicted value of each case with the fitted constants at ``values`` (NaN where refused)."""
    out = np.full(len(items), np.nan)
    with constants(values):
        forget_serving_rows()
        for i, c in enumerate(items):
            try:
                out[i] = c.kind.estimate(c.scenario)[c.kind.predicted]
            except DesignError:
                pass
    return out


def _round(x: float) -> float:
    return float(f"{x:.{DIGITS}g}")


def fit(items: list[Case], start: dict[str, float] | None = None) -> dict[str, float]:
    """Least-squares fit of the FITTED constants on the log error of the ``items`` whose kind is fitted
    (``runs.Kind.fitted``), from ``start`` (default: each constant's declared start)."""
    from scipy.optimize import least_squares

    items = [c for c in items if c.kind.fitted]
    names = list(cal.FITTED)
    lo = np.array([cal.FITTED[n].low for n in names])
    hi = np.array([cal.FITTED[n].high for n in names])
    scale = hi - lo
    measured = np.array([c.measured for c in items])
    x0 = np.array([start[n] if start else cal.FITTED[n].start for n in names])

    def residuals(u: np.ndarray) -> np.ndarray:  # u: the constants mapped to [0, 1] within their bounds
        pred = predictions(items, dict(zip(names, lo + u * scale, strict=True)))
        r = np.log(pred / measured)
        return np.where(np.isfinite(r), r, 0.0)

    res = least_squares(residuals, np.clip((x0 - lo) / scale, 0.0, 1.0), bounds=(0.0, 1.0), method="trf",
                        loss="soft_l1", f_scale=LOSS_SCALE, diff_step=1e-3, xtol=TOLERANCE, ftol=TOLERANCE)
    return {n: _round(v) for n, v in zip(names, lo + res.x * scale, strict=True)}


def mae(items: list[Case], pred: np.ndarray) -> float:
    """Mean absolute relative error of the predictions that exist."""
    err = [abs(p / c.measured - 1) for c, p in zip(items, pred, strict=True) if np.isfinite(p)]
    return sum(err) / len(err) if err else math.nan


def _fold(items: list[Case], source: str, start: dict[str, float] | None) -> tuple[str, dict, list[float]]:
    train = [c for c in items if c.source != source]
    held = [c for c in items if c.source == source]
    values = fit(train, start)  # never from the full fit, which saw this source
    return source, values, predictions(held, values).tolist()


def cross_validate(items: list[Case], jobs: int = -1, starts: dict[str, dict[str, float]] | None = None,
                   full: dict[str, float] | None = None) -> tuple[np.ndarray, dict]:
    """Leave-one-source-out: (each case's prediction by the fit that did not see its source, the
    constants of each fold). Every fold starts from the declared starts, or from ``starts[source]`` where
    given: a fold's own earlier constants (as recorded in the calibration file), which also never saw the
    source, so a refit from them converges in a few steps when nothing changed and is still a refit when
    something did. A source with no fitted record is predicted by the ``full`` fit (default: the shipped
    constants), which never saw it either."""
    from joblib import Parallel, delayed

    sources = sorted({c.source for c in items if c.kind.fitted})
    folds = Parallel(n_jobs=jobs)(delayed(_fold)(items, s, (starts or {}).get(s)) for s in sources)
    full = full or {n: getattr(cal, n) for n in cal.FITTED}
    scored = [c for c in items if c.source not in sources]
    if scored:
        folds.append((None, full, predictions(scored, full).tolist()))
    pred = np.full(len(items), np.nan)
    for source, _, held in folds[:len(sources)]:
        idx = [i for i, c in enumerate(items) if c.source == source]
        pred[idx] = held
    if scored:
        pred[[i for i, c in enumerate(items) if c.source not in sources]] = folds[-1][2]
    return pred, {source: values for source, values, _ in folds[:len(sources)]}


SCORED = "serving 2025-2026 (scored, not fitted)"


def group_of(c: Case) -> str:
    """The error group a case is reported and guarded in: its mode, or ``SCORED`` for a record that is
    scored but never fitted (its error is out of sample and must not dilute the fitted records')."""
    return c.kind.name if c.kind.fitted else SCORED


def errors_by(items: list[Case], pred: np.ndarray, key) -> dict[str, float]:
    """Mean absolute error per value of ``key(case)``."""
    out = {}
    for value in sorted({key(c) for c in items}):
        idx = [i for i, c in enumerate(items) if key(c) == value]
        out[value] = mae([items[i] for i in idx], pred[idx])
    return out


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def calibrate(items: list[Case], jobs: int = -1) -> dict:
    """The calibration file's content: fitted constants, their in-sample and cross-validated error,
    and the provenance (data hashes, the records used)."""
    values = fit(items)
    fitted = predictions(items, values)
    cv, folds = cross_validate(items, jobs, full=values)
    mode = group_of
    return {
        "version": FILE_VERSION,
        "date": datetime.date.today().isoformat(),
        "method": "least squares on log(predicted / measured) over every converted record, constants "
                  f"within their bounds, rounded to {DIGITS} significant digits; cross-validation leaves one "
                  "source out and refits (llmsim/validation/calibrate.py)",
        "data_sha256": {p.name: _sha256(p) for p in (DATA, DECODE_DATA, SERVING_DATA, SERVING_2026_DATA, RECIPES)},
        "constants": values,
        "bounds": {n: [f.low, f.high] for n, f in cal.FITTED.items()},
        "records": [c.rec["id"] for c in items],
        "error": {
            "in_sample": errors_by(items, fitted, mode),
            "cross_validated": errors_by(items, cv, mode),
            "cross_validated_by_source": errors_by(items, cv, lambda c: c.source),
            "cross_validated_by_hardware": errors_by(items, cv, lambda c: c.rec["hardware"]["accelerator"]),
        },
        "folds": folds,
    }


def write(path, content: dict) -> None:
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        json.dump(content, fh, indent=2)
        fh.write("\n")
