"""Inference predictions held against the published serving benchmarks of the calibration set.

The records are offline maximum-throughput runs (TensorRT-LLM ``trtllm-bench``, requests at infinite
rate, uniform synthetic input/output lengths; MLPerf Offline). llmsim models them as a static batch as
large as memory allows (``batch_size: max``): output tokens per second per device, the metric the
records publish (data README, caveat 4).
"""

from __future__ import annotations

from llmsim.validation.records import Skip, apply_recipe, source_of, system_of

# record model name prefix -> model preset of the same architecture (the presets cite their configs)
MODELS = {"Llama 3.1 8B": "llama3-8b", "Llama 3.3 70B": "llama3-70b", "Llama 3.1 405B": "llama3-405b",
          "Llama 3.1 70B": "llama3-70b", "Llama 2 7B": "llama2-7b", "Llama 2 13B": "llama2-13b",
          "Llama 2 70B": "llama2-70b", "LLaMA(2) 70B": "llama2-70b", "Qwen3-235B-A22B": "qwen3-235b-a22b",
          "Mixtral 8x7B": "mixtral-8x7b"}
PRECISIONS = {"fp8": "fp8", "fp4": "fp4", "nvfp4": "fp4", "bf16": "bf16", "fp16": "fp16"}


def scenario_dict(rec: dict) -> tuple[dict, list[str]]:
    """A scenario mapping for an inference record, and the assumptions made to complete it."""
    m, hw, p, w = rec["model"], rec["hardware"], rec["parallel"], rec["workload"]
    notes: list[str] = []
    model = next((preset for prefix, preset in MODELS.items() if m["name"].startswith(prefix)), None)
    if model is None:
        raise Skip(f"no model preset for {m['name']}")
    acc, net = system_of(rec)
    if not w.get("isl") or not w.get("osl"):
        raise Skip("input/output lengths not published (dataset-driven benchmark)")
    precision = PRECISIONS.get((str(p.get("precision") or "").split() or [""])[0].lower())
    if precision is None:
        raise Skip(f"precision {p.get('precision')} not modelled")
    # NVIDIA ModelOpt FP8/FP4 checkpoints quantise the KV cache to FP8 (hf_quant_config kv_cache_quant_algo)
    kv = "fp8" if precision in ("fp8", "fp4") else precision
    tp, pp = p.get("tp") or 1, p.get("pp") or 1
    ep = p.get("ep") or 1
    parallel = {"tp": tp, "pp": pp, "ep": ep, "dp": hw["count"] // (tp * pp), "sequence_parallel": False}
    batch = w.get("batch") or "max"
    scenario = {"model": model,
                "system": {"accelerator": acc, "num_devices": hw["count"], "network": net},
                "parallel": parallel,
                "workload": {"mode": "inference", "precision": precision, "kv_precision": kv,
                             "batch_size": batch, "input_len": w["isl"], "output_len": w["osl"],
                             "seq_len": w["isl"] + w["osl"]}}
    notes.append(f"static batch of {batch} (as published)" if batch != "max"
                 else "batch = largest that fits (offline max throughput)")
    scenario = apply_recipe(scenario, rec["id"], notes)
    final = scenario["workload"]
    if final["kv_precision"] == "fp8" and final["precision"] != "fp8":
        notes.insert(0, "FP8 KV cache (ModelOpt checkpoint)")
    return scenario, notes


def serving_dict(rec: dict) -> tuple[dict, list[str]]:
    """A serving-mode scenario for a closed-loop record (``serving_runs.yaml``): the record's split and
    lengths, its concurrency, on its engine's profile."""
    scenario, notes = scenario_dict({**rec, "workload": {**rec["workload"], "batch": 1}})
    w, engine = rec["workload"], rec["parallel"].get("engine") or "generic"
    scenario["workload"].update(mode="serving", concurrency=w["concurrency"])
    scenario["workload"].pop("batch_size")
    scenario["serving"] = {"engine": engine}
    notes[:] = [n for n in notes if not n.startswith("static batch")]
    notes.insert(0, f"closed loop, {w['concurrency']} requests in flight, {engine} profile")
    return scenario, notes


def measured_per_device(rec: dict) -> tuple[float, str]:
    x = rec["metrics"]
    if x.get("output_tokens_per_s_per_gpu"):
        return float(x["output_tokens_per_s_per_gpu"]), "output tokens/s per GPU as published"
    if x.get("output_tokens_per_s_total"):
        return x["output_tokens_per_s_total"] / rec["hardware"]["count"], "output tokens/s / GPUs"
    raise Skip("no output-throughput metric")


def measured_ttft(rec: dict) -> tuple[float, str]:
    ttft = rec["metrics"].get("ttft_ms")
    if not ttft:
        raise Skip("no time-to-first-token metric")
    return ttft / 1e3, "TTFT as published (ms / 1e3)"


def measured_tpot(rec: dict) -> tuple[float, str]:
    tpot = rec["metrics"].get("tpot_ms")
    if not tpot:
        raise Skip("no time-per-output-token metric")
    return tpot / 1e3, "TPOT (ms / 1e3; derivation in the record's notes)"


def ttft_details(out: dict, how: str) -> dict:
    """The columns of a first-token-latency row beyond the times."""
    return {"batch_size": out["batch_size"], "fits_in_memory": out["fits_in_memory"]}


def groups(rec: dict) -> dict:
    framework = (rec["parallel"].get("framework") or "").split(" (")[0] \
        if rec["category"] == "inference_decode_latency" or rec["category"].startswith("serving") \
        else "MLPerf" if rec["id"].startswith("mlperf") else "TensorRT-LLM"
    return {"paper": "-", "framework": framework,
            "hardware": rec["hardware"]["accelerator"], "source": source_of(rec)}


def serving_details(out: dict, how: str) -> dict:
    """The columns of a closed-loop serving row beyond the measured and predicted value."""
    return {"batch_size": out["running_requests_per_replica"], "ttft_s": out["ttft_s"], "tpot_s": out["tpot_s"],
            "fits_in_memory": out["fits_in_memory"]}


def details(out: dict, how: str) -> dict:
    """The columns of an inference row beyond the throughputs."""
    return {"batch_size": out["batch_size"], "ttft_s": out["ttft_s"], "tpot_s": out["tpot_s"],
            "fits_in_memory": out["fits_in_memory"]}
