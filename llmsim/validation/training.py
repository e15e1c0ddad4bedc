"""Training records of the calibration set as scenarios, and their measured throughput derived with the
source's own FLOP convention (see the data README).
"""

from __future__ import annotations

import re

from llmsim.validation.records import Skip, apply_recipe, source_of, system_of

ACTIVATIONS = {"gelu": "gelu", "swiglu": "swiglu", "squared relu": "squared-relu", "relu": "relu",
               "geglu": "geglu"}


def _recompute(text) -> str:
    """MaxText's 'custom' remat policies (and qkv_proj_offloaded) keep the large projections and
    recompute the rest, as selective recomputation does."""
    t = str(text or "none").lower()
    if t.startswith("full"):
        return "full"
    return "selective" if t.startswith(("selective", "custom", "qkv_proj")) else "none"


def _moe(m: dict, framework: str, notes: list[str]) -> dict:
    """The MoE block of a record: experts, top-k, shared experts, expert FFN; token-dropping runs carry
    their capacity factor in the record's notes (MaxText ``capacity_factor``)."""
    if not m.get("moe_experts") or not m.get("moe_top_k"):
        raise Skip("MoE shape incomplete")
    moe = {"experts": m["moe_experts"], "top_k": m["moe_top_k"], "shared_experts": m.get("moe_shared_experts") or 0,
           "expert_ffn_hidden": m.get("moe_expert_ffn") or m.get("ffn_hidden")}
    cf = re.search(r"capacity_factor\s*([0-9.]+)", framework)
    if cf:
        moe["capacity_factor"] = float(cf.group(1))
        notes.append(f"capacity factor {cf.group(1)}")
    return moe


def _interleaving(framework: str, notes: list[str]):
    """Virtual stages of an interleaved pipeline a record does not state: TorchTitan's default of two
    stages per rank for multi-stage schedules (torchtitan/distributed/pipeline.py, generate_split_points:
    num_stages_per_rank = 2); otherwise ``auto``, the fastest that fits."""
    if "torchtitan" in framework:
        notes.append("interleaved pipeline: TorchTitan's default 2 stages per rank")
        return 2
    notes.append("interleaved pipeline, virtual stages not stated: auto (the fastest that fits)")
    return "auto"


def _default_microbatch(p: dict, framework: str, dp, pp: int, vpp: int, notes: list[str]) -> int | str:
    """The microbatch a record does not state. FSDP frameworks without pipelining (MaxText, TorchTitan)
    run each rank's whole local batch at once (no gradient accumulation by default); TorchTitan's
    pipelines split it into one microbatch per stage (``pipeline_parallel_microbatches`` defaults to the
    number of stages). Other frameworks (Megatron-LM and Megatron-Core, NeMo, llm-foundry) have no default
    a record could rely on (Megatron's ``--micro-batch-size`` must be given): a benchmark that does not
    state it is taken at its tuned value, the fastest that fits (``auto``), as its unstated interleaving is."""
    gbs = p.get("global_batch_seqs")
    if gbs and dp and any(k in framework for k in ("MaxText", "torchtitan")):
        local = gbs // dp
        mb = max(1, local // (pp * vpp)) if pp > 1 else local
        notes.append(f"microbatch {mb} (local batch {local}{f' over {pp * vpp} stages' if pp > 1 else ''})")
        return mb
    notes.append("microbatch not stated: auto (the fastest that fits)")
    return "auto"


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
    framework = str(p.get("notes") or "") + str(p.get("framework") or "")
    if m.get("arch") == "moe" or m.get("moe_experts"):
        model["moe"] = _moe(m, framework, notes)
    if str(p.get("framework") or "").startswith("Megatron-LM (202"):
        # Megatron-LM's defaults --attention-dropout 0.1 --hidden-dropout 0.1 (megatron/arguments.py);
        # Korthikanti's 34*s*b*h activation count includes their masks.
        model["dropout"] = 0.1
        notes.append("Megatron-LM default dropout 0.1")
    if m["hidden"] % m["heads"]:
        raise Skip("hidden not divisible by heads")
    text = str(p.get("precision") or "").lower()
    # fp16 runs (Megatron-LM 2021: "fp16 mixed") at the fp16 GEMM rate; unspecified 16-bit as bf16
    precision = "fp8" if "fp8" in text else "fp16" if text.startswith("fp16") else "bf16"
    tp, pp, cp, ep = p["tp"] or 1, p["pp"] or 1, p.get("cp") or 1, p.get("ep") or 1
    dp = p.get("dp")
    if dp is not None and ep > 1 and tp * pp * cp * dp * ep == hw["count"]:
        dp *= ep  # records that count FSDP and expert ranks apart (MaxText): llmsim carves ep out of dp
        notes.append(f"dp {dp} = data x expert ranks")
    vpp = p.get("vpp") or (_interleaving(framework, notes) if "interleaved" in framework.lower() and pp > 1 else 1)
    microbatch = p.get("microbatch") or _default_microbatch(p, framework, dp, pp, 1 if vpp == "auto" else vpp,
                                                            notes)
    megatron_core = any(k in framework for k in ("Megatron-Core", "NeMo"))
    sp = p.get("sp")
    if sp is None and megatron_core and tp > 1:
        sp = True  # Megatron-Core: --tp-comm-overlap requires --sequence-parallel; NeMo turns it on with TP
        notes.append("sequence parallelism assumed (Megatron-Core default with TP)")
    if sp is None and "torchtitan" in framework and tp > 1:
        sp = True  # TorchTitan's TP plan shards the norms' sequence dimension (SequenceParallel)
        notes.append("sequence parallelism (TorchTitan TP plan)")
    zero = _zero(p.get("zero_or_fsdp"))
    if p.get("zero_or_fsdp") is None and "NeMo" in framework:
        zero = 1  # NeMo LLM recipes: optim.name distributed_fused_adam (ZeRO-1-like distributed optimizer)
        notes.append("NeMo distributed optimizer (ZeRO-1) assumed")
    parallel = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "microbatch_size": microbatch,
                "virtual_stages": vpp, "sequence_parallel": bool(sp),
                "recompute": _recompute(p.get("recompute")), "zero_stage": zero,
                # Megatron-Core --tp-comm-overlap; TorchTitan's AsyncTP overlaps the same collectives
                "tp_comm_overlap": "tp-comm-overlap" in framework or "AsyncTP" in str(rec.get("title")),
                # Megatron-LM of 2021-22 predates FlashAttention (Dao et al., May 2022)
                "flash_attention": not str(p.get("framework") or "").startswith("Megatron-LM (202"),
                "attention_kernel": _attention_kernel(framework, megatron_core)}
    if "torchtitan" in framework and zero == 3:
        # TorchTitan's FSDP2 MixedPrecisionPolicy takes reduce_dtype from --training.mixed_precision_reduce,
        # default and only choice "float32" (torchtitan/config_manager.py, 2024-25): fp32 reduce-scatters
        parallel["grad_reduce_dtype"] = "fp32"
        notes.append("TorchTitan reduces gradients in fp32 (mixed_precision_reduce)")
    if "moe" in model and "megablox False" in framework:
        parallel["moe_dispatch"] = "einsum"  # MaxText dense_matmul: GShard one-hot dispatch/combine einsums
        notes.append("MoE dispatch by one-hot einsums (MaxText megablox False)")
    scenario = {"model": model,
                "system": {"accelerator": acc, "num_devices": hw["count"], "network": net},
                "parallel": parallel,
                "workload": {"mode": "training", "precision": precision, "seq_len": m["seq_len"],
                             "global_batch_size": p["global_batch_seqs"]}}
    return apply_recipe(scenario, rec["id"], notes), notes


def _attention_kernel(framework: str, megatron_core: bool) -> str:
    """The fused-attention kernel a framework runs: Transformer Engine prefers cuDNN attention on Hopper
    and newer (NeMo docs, memory_optimizations.rst, NVIDIA/NeMo#9188); llm-foundry's MPT runs
    ``attn_impl: flash``, the flash-attn 2.x package (scripts/train/yamls/pretrain/mpt-*.yaml);
    TorchTitan calls PyTorch SDPA, whose flash backend is FlashAttention-2 (PyTorch 2.2 release notes)."""
    if megatron_core:
        return "cudnn"
    return "fa2" if any(k in framework for k in ("llm-foundry", "torchtitan")) else "auto"


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
                          "mpt": "llm-foundry", "nemo2407": "NeMo", "torchtitan": "TorchTitan",
                          "tpurecipes": "MaxText"}.get(src, src),
            "hardware": rec["hardware"]["accelerator"], "source": source_of(rec)}


def convert(rec: dict) -> tuple[dict, list[str]]:
    """``scenario_dict`` of a record that describes a full training step."""
    if rec["category"] == "training_microbenchmark":
        raise Skip("per-layer microbenchmark, not a full training step")
    return scenario_dict(rec)


def details(out: dict, how: str) -> dict:
    """The columns of a training row beyond the throughputs."""
    return {"step_time_s": out["step_time_s"], "mfu": out["mfu"], "fits_in_memory": out["fits_in_memory"],
            "measured_from": how}
