"""How many requests a serving replica runs at once: the KV-cache memory each engine leaves free by its
default memory setting, and the requests whose paged KV cache fits in it (engine/serving.py,
engine/disaggregation.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from llmsim.engine import speculative
from llmsim.engine.forward import kv_bytes_per_token_layer, logits_bytes_per_seq, workspace_per_token
from llmsim.engine.inference import memory_bytes
from llmsim.engine.request_mix import mix_moments
from llmsim.engine.split import Split
from llmsim.engine.types import Scenario

GIB = 2**30


def kv_budget(engine: str, hbm, weights, workspace, reserved, ranks):
    """Bytes a device gives its KV cache under ``engine``'s default memory setting (sources and quotes:
    docs/research/serving_engine_defaults.yaml)."""
    left = hbm - weights - workspace - reserved  # what llmsim's own accounting leaves (``generic``)
    if engine == "tensorrt-llm":  # KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory left free
        return 0.9 * left
    if engine in ("vllm", "atom"):  # gpu_memory_utilization 0.9 of the device for weights, activations and
        # the KV cache (ATOM v0.1.5 atom/config.py: the same default, 0.9)
        return left - 0.1 * hbm
    if engine == "sglang":  # mem_fraction_static: the device less (9.5 + tp x pp / 2) GiB under 90 GB,
        # (12 + tp x pp / 2) GiB to 160 GB, 32 GiB above, for weights and KV (server_args.py, 0.5.2)
        kept = np.where(hbm < 90 * GIB, (9.5 + ranks / 2) * GIB,
                        np.where(hbm < 160 * GIB, (12 + ranks / 2) * GIB, 32 * GIB))
        return hbm - kept - weights
    return left


def running_limit(sc: Scenario, sp: Split, input_len, output_len, lockstep: bool = False) -> dict:
    """Requests a replica can run at once: max_seqs, and the paged KV cache at the mean context of a
    running request (I + O/2 with fixed lengths, request_mix.mix_moments' ctx with a spread; rounded up
    to whole blocks) in what the weights, the step's workspace and the reserve leave free; ``lockstep``
    (a wave, engine/waves.py): at the full context I + O that every request of the wave reaches at once."""
    s, kvp = sc.serving, sc.workload.kv_cache
    draft = s.speculative.draft_model if s.speculative is not None else None
    if s.speculative is not None and draft is None:  # the draft head's layers hold weights and a KV cache
        sp = dataclasses.replace(sp, layers_per_stage=sp.layers_per_stage + s.speculative.draft_layers)
    blk = s.kv_block_tokens
    ctx = (np.asarray(input_len, dtype=float) + output_len if lockstep
           else mix_moments(sc.workload, input_len, output_len)["ctx"])
    # attention data-parallel: a rank caches its own requests' keys and values with every head, 1/tp of
    # the replica's requests
    ranks = sp.tp if sc.parallel.attention_dp else 1
    per_token = sp.layers_per_stage * kv_bytes_per_token_layer(sc.model, sp.tp // ranks, kvp)
    fixed = memory_bytes(sc, sp, 0, input_len, output_len)
    if draft is not None:  # a draft model: its weights and its KV cache on each of the target's tp ranks
        one = dataclasses.replace(sp, pp=np.ones_like(sp.pp), ep=np.ones_like(sp.ep),
                                  layers_per_stage=np.full_like(sp.layers_per_stage, draft.layers))
        fixed["weights"] = fixed["weights"] + memory_bytes(speculative.drafter(sc), one, 0, input_len,
                                                           output_len)["weights"]
        per_token = per_token + draft.layers * kv_bytes_per_token_layer(draft, sp.tp, kvp)
    per_seq = np.ceil(ctx / blk) * blk * per_token
    # the step's workspace: the live tensors of max_batch_tokens tokens and the fp32 logits of max_seqs
    workspace = s.max_batch_tokens * workspace_per_token(sc, sp.tp) + s.max_seqs * logits_bytes_per_seq(sc, sp.tp)
    free = kv_budget(s.engine, sc.accelerator.hbm_bytes, fixed["weights"], workspace, fixed["reserved"],
                     sp.tp * sp.pp)
    kv_fit = np.maximum(np.floor(free / per_seq), 0) * ranks
    return {"kv_per_seq_bytes": per_seq / ranks, "kv_free_bytes": free,
            "max_running": np.minimum(kv_fit, s.max_seqs).astype(np.int64)}
