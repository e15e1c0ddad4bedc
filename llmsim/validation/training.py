"""Training records of the calibration set as scenarios, and their measured throughput derived with the
source's own FLOP convention (see the data README).
"""

from __future__ import annotations

from llmsim.validation.records import Skip, recipe_settings, system_of

ACTIVATIONS = {"gelu": "gelu", "swiglu": "swiglu", "squared relu": "squared-relu", "relu": "relu",
               "geglu": "geglu"}


def _recompute(text) -> str:
    t = str(text or "none").lower()
    return "full" if t.startswith("full") else "selective" if t.startswith("selective") else "none"


def _zero(text) -> int:
    t = str(text or "none").lower()
    if "full_shard" in t or "fsdp" in t or "zero-3" in t:
        return 3
    if "distributed" in t or "zero-1" in t:
        return 1
    return 0


def scenario_dict(rec: dict) -> tuple[dict, list[str]]:
    """A scenario mapping for a training record, and the assumptions made to complete it."""
    m, hw, p = rec["model"], rec["hardware"], rec["parallel"]
    notes: list[str] = []
    acc, net = system_of(rec)
    if m.get("arch") != "dense" and m.get("moe_experts"):
        raise Skip("MoE calibration records are not converted yet")
    if m.get("layers") is None or m.get("hidden") is None or m.get("heads") is None:
        raise Skip("model shape incomplete")
    ffn = m.get("ffn_hidden")
    if ffn is None:
        ffn = 4 * m["hidden"]
        notes.append("ffn_hidden=4*hidden assumed")
    act_text = (m.get("activation") or "").lower()
    act = ACTIVATIONS.get(act_text)
    if act is None:
        act = "gelu"
        notes.append("activation gelu assumed")
    vocab = m.get("vocab")
    if vocab is None:
        vocab = 50257
        notes.append("vocab 50257 assumed")
    model = {"name": m["name"], "layers": m["layers"], "hidden": m["hidden"], "ffn_hidden": ffn,
             "heads": m["heads"], "kv_heads": m.get("kv_heads") or m["heads"], "vocab": vocab,
             "activation": act}
    if str(p.get("framework") or "").startswith("Megatron-LM (202"):
        # Megatron-LM's defaults --attention-dropout 0.1 --hidden-dropout 0.1 (megatron/arguments.py);
        # Korthikanti's 34*s*b*h activation count includes their masks.
        model["dropout"] = 0.1
        notes.append("Megatron-LM default dropout 0.1")
    if m["hidden"] % m["heads"]:
        raise Skip("hidden not divisible by heads")
    framework = str(p.get("notes") or "") + str(p.get("framework") or "")
    precision = "fp8" if "fp8" in str(p.get("precision") or "").lower() else "bf16"
    microbatch = p.get("microbatch")
    if microbatch is None:
        microbatch = 1
        notes.append("microbatch 1 assumed")
    megatron_core = any(k in framework for k in ("Megatron-Core", "NeMo"))
    sp = p.get("sp")
    if sp is None and megatron_core and (p["tp"] or 1) > 1:
        sp = True  # Megatron-Core: --tp-comm-overlap requires --sequence-parallel; NeMo turns it on with TP
        notes.append("sequence parallelism assumed (Megatron-Core default with TP)")
    zero = _zero(p.get("zero_or_fsdp"))
    if p.get("zero_or_fsdp") is None and "NeMo" in framework:
        zero = 1  # NeMo LLM recipes: optim.name distributed_fused_adam (ZeRO-1-like distributed optimizer)
        notes.append("NeMo distributed optimizer (ZeRO-1) assumed")
    parallel = {"tp": p["tp"] or 1, "pp": p["pp"] or 1, "dp": p.get("dp"), "cp": p.get("cp") or 1,
                "ep": p.get("ep") or 1, "microbatch_size": microbatch,
                "virtual_stages": p.get("vpp") or 1, "sequence_parallel": bool(sp),
                "recompute": _recompute(p.get("recompute")), "zero_stage": zero,
                "tp_comm_overlap": "tp-comm-overlap" in framework,
                # Megatron-LM of 2021-22 predates FlashAttention (Dao et al., May 2022)
                "flash_attention": not str(p.get("framework") or "").startswith("Megatron-LM (202"),
                "attention_kernel": _attention_kernel(framework, megatron_core)}
    scenario = {"model": model,
                "system": {"accelerator": acc, "num_devices": hw["count"], "network": net},
                "parallel": parallel,
                "workload": {"mode": "training", "precision": precision, "seq_len": m["seq_len"],
                             "global_batch_size": p["global_batch_seqs"]}}
    for section, keys in recipe_settings().get(rec["id"], {}).items():
        scenario[section].update(keys)
        notes.extend(f"recipe: {k} {v}" for k, v in keys.items())
    return scenario, notes


def _attention_kernel(framework: str, megatron_core: bool) -> str:
    """The fused-attention kernel a framework runs: Transformer Engine prefers cuDNN attention on Hopper
    and newer (NeMo docs, memory_optimizations.rst, NVIDIA/NeMo#9188); llm-foundry's MPT runs
    ``attn_impl: flash``, the flash-attn 2.x package (scripts/train/yamls/pretrain/mpt-*.yaml)."""
    if megatron_core:
        return "cudnn"
    return "fa2" if "llm-foundry" in framework else "auto"


def _per_token_flops(rec: dict, seq: int) -> float:
    """FLOPs per token by the source's own convention (data README table)."""
    m = rec["model"]
    conv = rec.get("flop_counting") or ""
    L, h, V = m["layers"], m["hidden"], m.get("vocab") or 50257
    if "96*B*s*l*h^2" in conv:  # Narayanan et al. 2021 eq. 3 (includes the recompute forward)
        return 96 * L * h * h * (1 + seq / (6 * h) + V / (16 * L * h))
    if "72*B*L*s*h^2" in conv or "Megatron-Core" in conv:  # Korthikanti app. A / Megatron model FLOPs
        return 72 * L * h * h * (1 + seq / (6 * h) + V / (12 * L * h))
    raise Skip("throughput not derivable: unknown FLOP convention")


def measured_tokens_per_s_per_device(rec: dict) -> tuple[float, str]:
    x, p, m = rec["metrics"], rec["parallel"], rec["model"]
    count, seq = rec["hardware"]["count"], m["seq_len"]
    if x.get("tokens_per_s_per_gpu"):
        return float(x["tokens_per_s_per_gpu"]), "tokens/s per GPU as published"
    if x.get("step_time_s") and p.get("global_batch_seqs"):
        return p["global_batch_seqs"] * seq / x["step_time_s"] / count, "global batch tokens / step time"
    if x.get("tflops_per_gpu"):
        return x["tflops_per_gpu"] * 1e12 / _per_token_flops(rec, seq), "TFLOP/s per GPU / source FLOPs per token"
    raise Skip("no throughput metric")


def group_of(rec: dict) -> dict:
    src = rec["id"].split("_")[0]
    return {"paper": {"megatron": "Narayanan 2021", "korthikanti": "Korthikanti 2022"}.get(src, "-"),
            "framework": {"megatron": "Megatron-LM", "korthikanti": "Megatron-LM", "mcore": "Megatron-Core",
                          "mpt": "llm-foundry", "nemo2407": "NeMo"}.get(src, src),
            "hardware": rec["hardware"]["accelerator"]}


def convert(rec: dict) -> tuple[dict, list[str]]:
    """``scenario_dict`` of a record that describes a full training step."""
    if rec["category"] == "training_microbenchmark":
        raise Skip("per-layer microbenchmark, not a full training step")
    return scenario_dict(rec)


def details(out: dict, how: str) -> dict:
    """The columns of a training row beyond the throughputs."""
    return {"step_time_s": out["step_time_s"], "mfu": out["mfu"], "fits_in_memory": out["fits_in_memory"],
            "measured_from": how}
