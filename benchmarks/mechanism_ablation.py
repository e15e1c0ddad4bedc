"""What each training mechanism of issues 18 and 37 moves: switch it off, refit the fitted constants, and
cross-validate (leave one source out), per source.

    python benchmarks/mechanism_ablation.py            # about 8 CPU-minutes a row, one process
    python benchmarks/mechanism_ablation.py blend tile # only the rows whose label holds one of the words

Each row switches one mechanism off in the engine (by its named constant, or by removing its term) and
reruns `llmsim calibrate`'s fit and cross-validation in this process; the first row is the engine as
shipped. The MoE routing operators and the einsum dispatch touch the two MoE records only: their
per-record errors are printed below the table.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine import training
from llmsim.engine.network import clear_caches
from llmsim.spec.presets import PresetRegistry
from llmsim.validation import calibrate as fit
from llmsim.validation.runs import cases

SWITCHES = {
    "as shipped": {},
    "no compute slowdown under overlap": {"OVERLAP_COMPUTE_SLOWDOWN": 0.0, "TP_OVERLAP_COMPUTE_SLOWDOWN": 0.0},
    "TP comm-GEMM overlap slowed as NCCL (no copy engines)": {"TP_OVERLAP_COMPUTE_SLOWDOWN": 0.189},
    "DP reduce hidden whole (no last bucket)": {"DP_BUCKET_PARAMS": 0.0, "DP_BUCKET_PARAMS_PER_RANK": 0.0},
    "no stragglers": {"straggler_time": lambda compute_s, devices, r: 0.0 * compute_s},
    # GEMM time by shape (issue 37, engine/gemm_shape.py)
    "no GEMM fixed time": {"GEMM_FIXED_S": 0.0},
    "no compute/memory blend (the larger of the two)": {"GEMM_BLEND_POWER": 60.0},
    "no tile padding": {"GEMM_TILE_ROWS": 1e-9, "GEMM_TILE_COLS": 1e-9},
    "no weight-gradient tile depth": {"WGRAD_TILE_DEPTH": 0.0},
}


@contextlib.contextmanager
def switched(changes: dict) -> Iterator[None]:
    """The engine with ``changes`` applied: calibration constants, or training-module functions."""
    old = {}
    try:
        for name, value in changes.items():
            owner = training if callable(value) else cal
            old[name] = (owner, getattr(owner, name))
            setattr(owner, name, value)
        clear_caches()
        yield
    finally:
        for name, (owner, value) in old.items():
            setattr(owner, name, value)
        clear_caches()


def main() -> None:
    items, _ = cases(PresetRegistry())
    training_items = [i for i, c in enumerate(items) if c.kind.name == "training"]
    sources = sorted({items[i].source for i in training_items})
    rows = []
    words = sys.argv[1:]
    for label, changes in SWITCHES.items():
        if words and not any(w in label for w in words):
            continue
        with switched(changes):
            cv, _ = fit.cross_validate(items, jobs=1)
        by = fit.errors_by([items[i] for i in training_items], cv[training_items], lambda c: c.source)
        total = fit.mae([items[i] for i in training_items], cv[training_items])
        rows.append((label, total, by))
        moe = {items[i].rec["id"]: cv[i] / items[i].measured - 1 for i in training_items
               if items[i].rec["model"].get("arch") == "moe"}
        print(f"{label}: training CV {100 * total:.1f}%; MoE records "
              + ", ".join(f"{k} {100 * v:+.1f}%" for k, v in moe.items()), file=sys.stderr)
    head = "| mechanism switched off | training CV | " + " | ".join(sources) + " |"
    print(head)
    print("|" + " --- |" * (2 + len(sources)))
    for label, total, by in rows:
        cells = " | ".join(f"{100 * by[s]:.1f}%" if np.isfinite(by[s]) else "-" for s in sources)
        print(f"| {label} | {100 * total:.1f}% | {cells} |")


if __name__ == "__main__":
    main()
