"""Scheduler defaults of the serving engines ``serving.engine`` names, as each engine's source sets them
for the accelerator (docs/research/serving_engine_defaults.yaml holds the versions, files, line numbers
and quotes). A value the scenario sets wins; ``generic`` keeps llmsim's earlier defaults."""

from __future__ import annotations

GIB = 2**30
ENGINES = ("generic", "vllm", "sglang", "tensorrt-llm", "atom")


def scheduler_defaults(engine: str, accelerator: str, hbm_bytes: float) -> dict[str, int | bool | str]:
    """max_batch_tokens, max_seqs, kv_block_tokens, chunked_prefill and scheduler of ``engine`` on an
    accelerator named ``accelerator`` with ``hbm_bytes`` of memory."""
    if engine == "vllm":
        # vLLM 0.10.1.1 (V1), online serving (vllm/engine/arg_utils.py L1638-L1715): 8,192 batched tokens
        # and 1,024 sequences on GPUs of 70 GiB or more other than the A100, else 2,048 and 256; blocks of
        # 16 tokens (vllm/platforms/cuda.py L137)
        large = hbm_bytes >= 70 * GIB and "a100" not in accelerator.lower()
        return {"max_batch_tokens": 8192 if large else 2048, "max_seqs": 1024 if large else 256,
                "kv_block_tokens": 16, "chunked_prefill": True,  # V1 always chunks (arg_utils.py L1588)
                # V1 schedules the running requests' decode tokens first and prompt chunks in what is left
                # of the step's budget (vllm/v1/core/sched/scheduler.py, schedule())
                "scheduler": "mixed"}
    if engine == "sglang":
        # SGLang 0.5.2 (python/sglang/srt/server_args.py L508-L518): chunked_prefill_size 2,048 under 35 GB,
        # 8,192 under 160 GB, else 16,384; page_size 1 (L623); max_running_requests auto: the KV pool's
        # tokens / 2 capped by a request pool of at most 4,096 (managers/tp_worker.py L137-L145)
        mib = hbm_bytes / 2**20
        chunk = 2048 if mib < 35 * 1024 else 8192 if mib < 160 * 1024 else 16384
        # get_next_batch_to_run (managers/scheduler.py): "Run prefill first if possible", decode only when no
        # prompt waits; enable_mixed_chunk False (server_args.py) keeps prompt steps free of decodes
        return {"max_batch_tokens": chunk, "max_seqs": 4096, "kv_block_tokens": 1, "chunked_prefill": True,
                "scheduler": "prefill_first"}
    if engine == "tensorrt-llm":
        # TensorRT-LLM BuildConfig / trtllm-serve: max_num_tokens 8,192, max_batch_size 2,048
        # (tensorrt_llm/builder.py; commands/serve.py); KV cache tokens_per_block 32 (KvCacheConfig);
        # enable_chunked_prefill False (LLM API reference, TorchLlmArgs)
        # in-flight batching runs context and generation requests in one batch (GptManager / PyExecutor)
        return {"max_batch_tokens": 8192, "max_seqs": 2048, "kv_block_tokens": 32, "chunked_prefill": False,
                "scheduler": "mixed"}
    if engine == "atom":
        # AMD's ATOM v0.1.5 (ROCm/ATOM b0071c5, atom/config.py L983-L1001): max_num_batched_tokens 16,384,
        # max_num_seqs 512, kv_cache_block_size 16, chunked prefill on; its scheduler returns a step of
        # prompts alone whenever one was scheduled and decodes only when none wait ("prefill-first ... no
        # decode mixing", docs/scheduling_kv_cache_guide.md; atom/model_engine/scheduler.py L687-L760)
        return {"max_batch_tokens": 16384, "max_seqs": 512, "kv_block_tokens": 16, "chunked_prefill": True,
                "scheduler": "prefill_first"}
    # generic: TensorRT-LLM's max_num_tokens 8,192 (TensorRT-LLM docs, "Tuning max batch size and max num
    # tokens"), vLLM V0's max_num_seqs 256 and block_size 16 (Kwon et al. 2023, PagedAttention, sec. 4)
    return {"max_batch_tokens": 8192, "max_seqs": 256, "kv_block_tokens": 16, "chunked_prefill": True,
            "scheduler": "mixed"}
