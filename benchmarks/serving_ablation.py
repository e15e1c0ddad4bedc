"""What each serving mechanism of issue 36 moves on the 2025-2026 serving records (llmsim/data/serving_runs_2026.yaml,
scored by `llmsim validate`, never fitted: no refit is needed, a row is one pass over the records).

    python benchmarks/serving_ablation.py        # ~1 CPU-minute

Each row switches one mechanism off by changing what the records' scenarios say (the converter's output,
llmsim/validation/serving_2026.py) and prints the mean absolute error of TPOT, TTFT and output tokens/s per
GPU, MoE and dense apart (records in brackets: a switch may refuse some, e.g. a deployment that no longer
fits). The first row is llmsim as shipped.
"""

from __future__ import annotations

import copy
import math

from llmsim.engine.errors import DesignError
from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.validation import serving_2026 as s26
from llmsim.validation.records import Skip, scenario_of
from llmsim.validation.runs import _estimate_serving_point


def _drop(section: str, key: str):
    def change(data: dict) -> dict:
        data.get(section, {}).pop(key, None)
        return data
    return change


def _mixed_scheduler(data: dict) -> dict:
    data.setdefault("serving", {})["scheduler"] = "mixed"
    return data


def _fp4_for_native(data: dict) -> dict:
    if data["workload"]["precision"] == "native":  # gpt-oss: MXFP4 experts beside BF16 attention, as released
        data["workload"]["precision"] = "fp4"
    return data


SWITCHES = {
    "as shipped": lambda d: d,
    "no attention data parallelism": _drop("parallel", "attention_dp"),
    "no start burst (steady state alone)": _drop("workload", "num_prompts"),
    "generic engine profile (no vLLM/SGLang/TRT-LLM/ATOM defaults)": _drop("serving", "engine"),
    "no step-token budget from the record": _drop("serving", "max_batch_tokens"),
    "KV cache at the model's 16-bit dtype": _drop("workload", "kv_precision"),
    "gpt-oss all-FP4 (not its released MXFP4 + BF16)": _fp4_for_native,
    "mixed scheduler everywhere (no prefill-first waves)": _mixed_scheduler,
}
NAMES = {"tpot": "TPOT", "ttft": "TTFT", "tput": "tok/s/GPU"}
PREDICTED = {"tpot": "tpot_s", "ttft": "ttft_s", "tput": "throughput_tokens_per_s_per_device"}


def errors(change, registry) -> dict[tuple[str, bool], list[float]]:
    """(metric, MoE) -> relative errors of the records the switched scenarios predict."""
    out: dict[tuple[str, bool], list[float]] = {}
    rows = {}
    for rec in s26.records():
        row = rec["row_id"]
        if row not in rows:
            try:
                data, _ = s26.scenario_dict(rec)
                sc = scenario_of(change(copy.deepcopy(data)), registry)
                rows[row] = (sc, _estimate_serving_point(sc))
            except (Skip, DesignError, SpecError, ValueError):  # ValueError: the schema refuses it
                rows[row] = None
        if rows[row] is None:
            continue
        sc, got = rows[row]
        metric = rec["category"].rsplit("_", 1)[1]
        predicted, measured = got[PREDICTED[metric]], s26.measured_values(rec)[metric]
        if predicted is not None and math.isfinite(predicted):
            out.setdefault((metric, sc.model.moe is not None), []).append(predicted / measured - 1)
    return out


def main() -> None:
    registry = PresetRegistry()
    cols = [(m, moe) for m in ("tpot", "ttft", "tput") for moe in (True, False)]
    print("| mechanism switched off | " + " | ".join(f"{NAMES[m]} {'MoE' if moe else 'dense'}" for m, moe in cols) + " |")
    print("| --- |" + " ---: |" * len(cols))
    for label, change in SWITCHES.items():
        got = errors(change, registry)
        cells = []
        for key in cols:
            e = got.get(key, [])
            cells.append(f"{100 * sum(abs(x) for x in e) / len(e):.1f}% ({len(e)})" if e else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
