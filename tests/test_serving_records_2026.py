"""The 2025-2026 serving records (llmsim/data/serving_runs_2026.yaml) as calibration records: converted
as the published row states them, measured as published, scored by validate and never fitted."""

import pytest

from llmsim.validation import serving_2026
from llmsim.validation.runs import SERVING_2026, cases

ATOM_C256 = "atom_qwen3_235b_2507_fp8_mi355x_tp8ep8_1000_1000_c256"


def _row(rid):
    import yaml

    return next(r for r in yaml.safe_load(serving_2026.DATA.read_text(encoding="utf-8")) if r["id"] == rid)


def test_an_atom_row_converts_as_published():
    # ROCm ATOM recipes/Qwen3-235b.md, ISL 1000 / OSL 1000 / concurrency 256, TP8 + EP8, num_prompts 1024,
    # --max-num-batched-tokens 20000, FP8 weights and KV cache
    data, notes = serving_2026.scenario_dict(_row(ATOM_C256))
    assert "closed loop, 256 requests in flight" in notes
    assert data["model"] == "qwen3-235b-a22b"
    assert data["system"] == {"accelerator": "mi355x", "num_devices": 8, "network": "mi355x-8"}
    assert data["parallel"] == {"tp": 8, "pp": 1, "ep": 8}
    assert data["workload"] == {"mode": "serving", "precision": "fp8", "kv_precision": "fp8", "input_len": 1000,
                                "output_len": 1000, "concurrency": 256, "num_prompts": 1024}
    assert data["serving"] == {"engine": "atom", "max_batch_tokens": 20000}
    # total 22,239.78 tokens/s x 1000 / (1000 + 1000) output / 8 GPUs = 1,389.99 output tokens/s per GPU
    got = serving_2026.measured_values(_row(ATOM_C256))
    assert got["tput"] == pytest.approx(1389.98625)
    assert got["tpot"] == pytest.approx(0.02055) and got["ttft"] == pytest.approx(2.45283)


def test_each_published_metric_is_one_record_and_offline_rows_are_not_records():
    recs = serving_2026.records()
    ids = {r["id"] for r in recs}
    assert {f"{ATOM_C256}_{m}" for m in ("tpot", "ttft", "tput")} <= ids
    # trtllm-bench's offline rows (every prompt at once, no concurrency or rate) stay research notes
    assert not any(r["row_id"].startswith("trtllm_po_") for r in recs)
    assert all(r["category"] in {f"serving_2026_{m}" for m in serving_2026.METRICS} for r in recs)


def test_the_records_are_scored_not_fitted_and_share_one_scenario_per_row(registry):
    items, _ = cases(registry, SERVING_2026)
    assert len(items) >= 40 and sum(c.scenario.model.moe is not None for c in items) >= 15
    assert not any(c.kind.fitted for c in items)
    by_row = {}
    for c in items:
        by_row.setdefault(c.rec["row_id"], set()).add(id(c.scenario))
    assert all(len(s) == 1 for s in by_row.values())
