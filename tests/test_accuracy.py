"""Accuracy regression: the shipped constants are what `llmsim calibrate` fits, the error does not rise
more than one point above the figures recorded at the last calibration, and every record that converted
then still converts. A change that doubles the error cannot pass unnoticed.
"""

import json
import math

import pytest

from llmsim.engine import calibration as cal
from llmsim.validation import calibrate as fitting
from llmsim.validation.runs import cases

RECORDED = json.loads(cal.CALIBRATION_FILE.read_text(encoding="utf-8"))
SLACK = 0.01  # one point of mean absolute error


@pytest.fixture(scope="module")
def items(registry):
    return cases(registry)[0]


def _mode_errors(items, pred) -> dict[str, float]:
    # training, inference (fitted records) and the scored-only 2025-2026 serving records apart: a regression
    # of the fitted records is not diluted by the others
    return fitting.errors_by(items, pred, fitting.group_of)


def regressions(items, values: dict[str, float], cross_validated: dict[str, float] | None) -> list[str]:
    """What rose more than SLACK above the recorded errors (in-sample with ``values``; cross-validated)."""
    out = []
    in_sample = _mode_errors(items, fitting.predictions(items, values))
    for mode, err in in_sample.items():
        if err > RECORDED["error"]["in_sample"][mode] + SLACK:
            out.append(f"{mode} in-sample MAE {err:.3f} > recorded {RECORDED['error']['in_sample'][mode]:.3f}")
    for mode, err in (cross_validated or {}).items():
        if err > RECORDED["error"]["cross_validated"][mode] + SLACK:
            out.append(f"{mode} cross-validated MAE {err:.3f} > recorded "
                       f"{RECORDED['error']['cross_validated'][mode]:.3f}")
    return out


def test_every_record_that_converted_at_calibration_still_converts_and_is_predicted(items):
    assert set(RECORDED["records"]) <= {c.rec["id"] for c in items}
    pred = fitting.predictions(items, cal.fitted_values())  # NaN where the engine refuses the record
    refused = [c.rec["id"] for c, p in zip(items, pred, strict=True) if not math.isfinite(p)]
    # a TTFT measured at a Poisson rate llmsim puts past its capacity has no steady state to predict: refused
    # (the MLPerf Server rows; validate lists them with the rate); any other refusal is a regression
    poisson_ttft = {c.rec["id"] for c in items if c.rec["category"] == "serving_2026_ttft"
                    and c.scenario.workload.request_rate_per_s is not None}
    assert set(refused) <= poisson_ttft


def test_calibrate_reproduces_the_shipped_constants(items):
    assert fitting.fit(items) == cal.fitted_values()
    assert RECORDED["data_sha256"] == {p.name: fitting._sha256(p) for p in (
        fitting.DATA, fitting.DECODE_DATA, fitting.SERVING_DATA, fitting.SERVING_2026_DATA, fitting.RECIPES)}


def test_fitted_constants_lie_within_their_physical_bounds():
    for name, f in cal.FITTED.items():
        assert f.low <= getattr(cal, name) <= f.high


def test_cross_validated_error_has_not_risen(items):
    # each fold refits on the other sources, from that fold's recorded constants (which never saw the source
    # held out): unchanged physics converges in a step or two; changed physics moves the refit
    pred, folds = fitting.cross_validate(items, jobs=2, starts=RECORDED["folds"])
    cv = _mode_errors(items, pred)
    assert all(math.isfinite(v) for v in cv.values()) and len(folds) >= 9
    assert regressions(items, cal.fitted_values(), cv) == []


def test_the_guard_fails_when_kernel_efficiency_moves_by_a_tenth(items):
    # the same check with KERNEL_EFFICIENCY 0.1 off the fitted value: GEMMs 14% faster or slower moves
    # the error by several points, so the guard must report it
    for delta in (0.1, -0.1):
        moved = {**cal.fitted_values(), "KERNEL_EFFICIENCY": cal.KERNEL_EFFICIENCY + delta}
        assert regressions(items, moved, None), delta
