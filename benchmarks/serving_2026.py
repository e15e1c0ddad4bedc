"""Published 2025-2026 serving measurements (docs/research/serving_records_2026.yaml, collected 2026-11-28)
held against `llmsim estimate --mode serving`: the issue-36 baseline, MoE and dense apart.

    python benchmarks/serving_2026.py           # table and mean errors on stdout
    python benchmarks/serving_2026.py --csv     # one row per record

A record is used when it is a closed loop at a stated concurrency (a benchmark client keeping N requests
in flight) or an open loop at a stated Poisson rate (MLPerf Inference Server), on a model and accelerator
with a preset. Offline and burst rows (every prompt sent at once) wait for a model of the start burst.
Attention data parallelism (SGLang --enable-dp-attention, TensorRT-LLM attention DP) is not modelled yet:
those rows run as plain tp/ep and are flagged ``dp-attn``. Lengths drawn from a data set (ShareGPT, MLPerf's)
run at their published means, fixed. Output throughput is the record's output tokens/s, or the total
tokens/s times O / (I + O) where only the total is published (ATOM's tables).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml
from error_table import print_table

from llmsim.engine.errors import DesignError
from llmsim.spec.engines import ENGINES
from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

RECORDS = Path(__file__).resolve().parent.parent / "docs" / "research" / "serving_records_2026.yaml"
# record's accelerator -> (accelerator preset, network preset)
HARDWARE = {"H100": ("h100-sxm", "dgx-h100"), "H200": ("h200-sxm", "dgx-h200"), "B200": ("b200", "dgx-b200"),
            "GB200": ("gb200", "gb200-nvl72"), "MI300X": ("mi300x", "mi300x-8"), "MI325X": ("mi325x", "mi325x-8"),
            "MI355X": ("mi355x", "mi355x-8")}
# substring of the record's model id (lower case) -> model preset, first match
MODELS = [("deepseek-r1", "deepseek-r1"), ("deepseek-v3", "deepseek-v3"), ("gpt-oss-120b", "gpt-oss-120b"),
          ("gpt-oss-20b", "gpt-oss-20b"), ("qwen3-235b", "qwen3-235b-a22b"), ("qwen3-30b", "qwen3-30b-a3b"),
          ("qwen3-8b", "qwen3-8b"), ("llama-3.3-70b", "llama3-70b"), ("llama-3.1-70b", "llama3-70b"),
          ("llama-2-70b", "llama2-70b"), ("llama2-70b", "llama2-70b"), ("mixtral-8x7b", "mixtral-8x7b"),
          ("llama-3.1-8b", "llama3.1-8b")]
MOE = ("deepseek", "gpt-oss", "qwen3-235b", "qwen3-30b", "mixtral")


def _precision(text: str, model: str) -> str | None:
    t = str(text or "").lower()
    if "mxfp4" in t and model.startswith("gpt-oss"):
        return "native"  # MXFP4 experts beside BF16 attention, as released
    for word, name in (("nvfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "bf16")):
        if word in t:
            return name
    return None


def scenario_overrides(rec: dict) -> tuple[list[str], list[str]] | None:
    """(`--set` overrides of the record's scenario, flags), or None when it cannot be modelled."""
    hw, p, w = rec["hardware"], rec["parallel"], rec["workload"]
    ident = f"{rec['model'].get('hf_id') or ''} {rec['model'].get('name') or ''}".lower()
    model = next((preset for key, preset in MODELS if key in ident), None)
    acc = HARDWARE.get(str(hw.get("accelerator")))
    conc, rate = w.get("concurrency"), w.get("request_rate_per_s")
    load = (f"workload.concurrency={conc}" if isinstance(conc, int) else
            f"workload.request_rate_per_s={rate}" if isinstance(rate, (int, float)) else None)
    if None in (model, acc, load, p.get("tp"), w.get("isl"), w.get("osl")) or w["osl"] < 2:
        return None
    prec = _precision(p.get("weight_precision"), model)
    if prec is None:
        return None
    kv = _precision(p.get("kv_cache_precision"), model)
    ep = p.get("ep") or 1
    flags = ["dp-attn"] if p.get("attention_dp") else []
    budget = re.search(r"--max-num-batched-tokens[ =](\d+)", str(p.get("flags") or ""))
    sets = [f"model={model}", f"system.accelerator={acc[0]}", f"system.network={acc[1]}",
            f"system.num_devices={hw['count']}", f"parallel.tp={p['tp']}", f"parallel.pp={p.get('pp') or 1}",
            f"parallel.ep={ep}", "workload.mode=serving", f"workload.precision={prec}",
            *([f"workload.kv_precision={kv}"] if kv not in (None, "native") else []),
            f"workload.input_len={round(w['isl'])}", f"workload.output_len={round(w['osl'])}", load,
            *([f"serving.engine={p['engine']}"] if p.get("engine") in ENGINES else []),
            *([f"serving.max_batch_tokens={budget.group(1)}"] if budget else [])]
    return sets, flags


def _measured(rec: dict) -> dict:
    m, w = rec.get("metrics") or {}, rec["workload"]
    out_tps = m.get("output_tokens_per_s")
    if out_tps is None and m.get("total_tokens_per_s") is not None:
        out_tps = m["total_tokens_per_s"] * w["osl"] / (w["isl"] + w["osl"])
    tpot = m.get("tpot_ms_mean") or m.get("itl_ms_mean")
    return {"tpot": tpot and tpot / 1e3, "ttft": m.get("ttft_ms_mean") and m["ttft_ms_mean"] / 1e3,
            "throughput": out_tps}


def rows() -> list[dict]:
    registry = PresetRegistry()
    out = []
    for rec in yaml.safe_load(RECORDS.read_text(encoding="utf-8")):
        conv = scenario_overrides(rec)
        if conv is None:
            continue
        sets, flags = conv
        row = {"id": rec["id"], "engine": rec["parallel"].get("engine"),
               "moe": any(k in sets[0] for k in MOE), "flags": " ".join(flags)}
        try:
            got = est.record(est.load(None, registry, sets))
        except (DesignError, SpecError) as err:
            out.append({**row, "error": str(err).splitlines()[0][:90]})
            continue
        measured = _measured(rec)
        for key, predicted in (("tpot", got.get("tpot_s")), ("ttft", got.get("ttft_s")),
                               ("throughput", got.get("throughput_tokens_per_s"))):
            row[f"{key}_measured"], row[f"{key}_predicted"] = measured[key], predicted
            finite = predicted is not None and math.isfinite(predicted)
            row[f"{key}_error"] = predicted / measured[key] - 1 if measured[key] and predicted and finite else None
            if measured[key] and not finite:  # an open loop past the predicted capacity: no steady state
                row["flags"] = f"{row['flags']} overloaded".strip()
        out.append(row)
    return out


def main() -> None:
    table = rows()
    if print_table(table, "flags", "output tokens/s"):
        return
    print()
    for kind, pick in (("MoE", True), ("dense", False)):
        for key in ("tpot", "ttft", "throughput"):
            errs = [r[f"{key}_error"] for r in table if r.get("moe") == pick and r.get(f"{key}_error") is not None]
            if errs:
                mean_abs = 100 * sum(abs(e) for e in errs) / len(errs)
                signed = 100 * sum(errs) / len(errs)
                over = sum(1 for r in table if r.get("moe") == pick and "overloaded" in r.get("flags", "")
                           and r.get(f"{key}_measured") and r.get(f"{key}_error") is None)
                print(f"{kind:5s} {key:10s}: mean absolute error {mean_abs:5.1f}% (signed {signed:+.1f}%) "
                      f"over {len(errs)} records" + (f"; {over} more predicted past capacity" if over else ""))


if __name__ == "__main__":
    main()
