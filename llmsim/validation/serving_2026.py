"""Published 2025-2026 serving measurements (``llmsim/data/serving_runs_2026.yaml``, collected 2026-11-28 for
issue 36): fine-grained MoE and dense models served in FP4/FP8/BF16 by vLLM, SGLang, TensorRT-LLM and AMD's
ATOM on B200, GB200, H100, H200, MI300X, MI325X and MI355X, at a closed-loop concurrency or an open-loop
Poisson rate.

One file record is one published row; ``records`` splits it into one calibration record per metric it
publishes (TPOT, TTFT, output tokens/s per GPU: categories ``serving_2026_tpot`` etc.), as
``serving_runs.yaml`` holds them. Lengths drawn from a data set (ShareGPT, MLPerf's) run at their published
means, fixed; rows with attention data parallelism run with ``parallel.attention_dp``; the client's
``num_prompts`` gives the closed loop's start burst. The file's offline and burst rows (every prompt sent at
once: 47 of its 83) are research notes, not calibration records; a row llmsim cannot model gets ``Skip``'s
reason in the report. Output throughput is the record's output tokens/s, or its total tokens/s times
O / (I + O) where only the total is published (ATOM's tables).
"""

from __future__ import annotations

import re
from pathlib import Path

from llmsim.validation.records import Skip, system_of

DATA = Path(__file__).parent.parent / "data" / "serving_runs_2026.yaml"
METRICS = ("tpot", "ttft", "tput")
# substring of the record's model id (lower case) -> model preset, first match
MODELS = (("deepseek-r1", "deepseek-r1"), ("deepseek-v3", "deepseek-v3"), ("gpt-oss-120b", "gpt-oss-120b"),
          ("gpt-oss-20b", "gpt-oss-20b"), ("qwen3-235b", "qwen3-235b-a22b"), ("qwen3-30b", "qwen3-30b-a3b"),
          ("qwen3-8b", "qwen3-8b"), ("llama-3.3-70b", "llama3-70b"), ("llama-3.1-70b", "llama3-70b"),
          ("llama-2-70b", "llama2-70b"), ("llama2-70b", "llama2-70b"), ("mixtral-8x7b", "mixtral-8x7b"),
          ("llama-3.1-8b", "llama3.1-8b"))
ENGINES = ("vllm", "sglang", "tensorrt-llm", "atom")
# the publisher of each record id's prefix: one benchmark table or page, the unit of leave-one-source-out
SOURCES = {"trtllm_po": "TensorRT-LLM perf overview", "trtllm_dsr1": "TensorRT-LLM DeepSeek-R1 blog",
           "gpustack": "GPUStack Performance Lab", "atom": "ROCm ATOM recipes",
           "amd_perfpage": "AMD Instinct performance page", "mlperf51": "MLPerf Inference v5.1",
           "sglang": "SGLang GB200 blog", "vllm": "vLLM Blackwell blogs"}


def records(path: Path = DATA) -> list[dict]:
    """Each published row at a closed-loop concurrency or a Poisson rate as one calibration record per
    metric it publishes (id ``<row>_<metric>``)."""
    import yaml

    with open(path, encoding="utf-8") as fh:
        rows = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out = []
    for rec in rows:
        w = rec["workload"]
        if not isinstance(w.get("concurrency"), int) and not isinstance(w.get("request_rate_per_s"), (int, float)):
            continue  # offline and burst rows (every prompt at once) stay research notes, not calibration records
        values = measured_values(rec)
        out += [{**rec, "id": f"{rec['id']}_{m}", "row_id": rec["id"], "category": f"serving_2026_{m}"}
                for m in METRICS if values[m]]
    return out


def measured_values(rec: dict) -> dict:
    """Mean TPOT and TTFT (s) and output tokens/s per GPU as the record publishes them (None where not)."""
    m, w, hw = rec.get("metrics") or {}, rec["workload"], rec["hardware"]
    out_tps = m.get("output_tokens_per_s")
    if out_tps is None and m.get("total_tokens_per_s") is not None and w.get("isl") and w.get("osl"):
        out_tps = m["total_tokens_per_s"] * w["osl"] / (w["isl"] + w["osl"])
    tpot = m.get("tpot_ms_mean") or m.get("itl_ms_mean")
    ttft = m.get("ttft_ms_mean")
    return {"tpot": tpot and tpot / 1e3, "ttft": ttft and ttft / 1e3,
            "tput": out_tps and hw.get("count") and out_tps / hw["count"]}


def _precision(text, model: str) -> str | None:
    t = str(text or "").lower()
    if "mxfp4" in t and model.startswith("gpt-oss"):
        return "native"  # MXFP4 experts beside BF16 attention, as released
    for word, name in (("nvfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "bf16")):
        if word in t:
            return name
    return None


def scenario_dict(rec: dict) -> tuple[dict, list[str]]:
    """The serving scenario of a record, and the assumptions made to complete it."""
    hw, p, w = rec["hardware"], rec["parallel"], rec["workload"]
    ident = f"{rec['model'].get('hf_id') or ''} {rec['model'].get('name') or ''}".lower()
    model = next((preset for key, preset in MODELS if key in ident), None)
    if model is None:
        raise Skip(f"no model preset for {rec['model'].get('name')}")
    acc, net = system_of(rec)
    conc, rate = w.get("concurrency"), w.get("request_rate_per_s")
    if not isinstance(conc, int) and not isinstance(rate, (int, float)):
        raise Skip(f"neither a closed-loop concurrency nor a Poisson rate (concurrency {conc}, rate {rate})")
    if not p.get("tp") or not w.get("isl") or not w.get("osl") or w["osl"] < 2:
        raise Skip("tp, input or output length not published")
    prec = _precision(p.get("weight_precision"), model)
    if prec is None:
        raise Skip(f"weight precision {p.get('weight_precision')} not modelled")
    kv = _precision(p.get("kv_cache_precision"), model)
    notes = [f"closed loop, {conc} requests in flight" if isinstance(conc, int) else f"Poisson, {rate} requests/s"]
    workload = {"mode": "serving", "precision": prec, "input_len": round(w["isl"]), "output_len": round(w["osl"])}
    if kv not in (None, "native"):
        workload["kv_precision"] = kv
    if isinstance(conc, int):
        workload["concurrency"] = conc
        if isinstance(w.get("num_prompts"), int) and w["num_prompts"] >= conc:  # the client's start burst
            workload["num_prompts"] = w["num_prompts"]
    else:
        workload["request_rate_per_s"] = float(rate)
    if w["isl"] != round(w["isl"]) or "sharegpt" in str(w.get("lengths") or rec["id"]).lower():
        notes.append("data-set lengths at their published means, fixed")
    parallel = {"tp": p["tp"], "pp": p.get("pp") or 1, "ep": p.get("ep") or 1}
    if p.get("attention_dp"):
        parallel["attention_dp"] = True
        notes.append("attention data-parallel")
    serving = {"engine": p["engine"]} if p.get("engine") in ENGINES else {}
    budget = re.search(r"--max-num-batched-tokens[ =](\d+)", str(p.get("flags") or ""))
    if budget:
        serving["max_batch_tokens"] = int(budget.group(1))
    notes.append(f"{serving.get('engine', 'generic')} profile")
    return {"model": model, "system": {"accelerator": acc, "num_devices": hw["count"], "network": net},
            "parallel": parallel, "workload": workload, "serving": serving}, notes


def measured(metric: str):
    """The measurement function of a metric's records: (value, how)."""
    how = {"tpot": "mean TPOT as published (ms / 1e3)", "ttft": "mean TTFT as published (ms / 1e3)",
           "tput": "output tokens/s per GPU (published output, or total x O/(I+O))"}[metric]

    def get(rec: dict) -> tuple[float, str]:
        return measured_values(rec)[metric], how
    return get


def groups(rec: dict) -> dict:
    """A record's report groups: its engine as framework, accelerator, source (publisher)."""
    rid = rec.get("row_id", rec["id"])
    source = next((name for prefix, name in SOURCES.items() if rid.startswith(prefix)), rid.split("_")[0])
    return {"paper": "-", "framework": rec["parallel"].get("engine") or "-",
            "hardware": rec["hardware"]["accelerator"], "source": source}
