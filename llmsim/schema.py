"""The output contract: every column llmsim writes, declared once.

Each ``Column`` says what a result means (unit, the modes that produce it, whether larger is better).
The order of ``COLUMNS`` is the order of a row's columns; the engine's records are put in it
(``order``), the rich tables and plots take their labels and directions from it, the sweep checks its
objectives against it, ``llmsim columns`` prints it and ``docs/columns.md`` is generated from it
(``markdown``). Column names are what users' spreadsheets read: renaming one is a breaking change.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("training", "inference", "serving")
# when a column is present besides its modes: always, with an SLO, at a Poisson request rate, with
# disaggregated pools, or in a sweep's rows only
WHEN = {"": "always", "slo": "with serving.slo_ttft_s or serving.slo_tpot_s",
        "open_loop": "with workload.request_rate_per_s (estimate)",
        "open_loop_slo": "with workload.request_rate_per_s and an SLO (estimate)",
        "disaggregated": "with serving.disaggregation", "colocated": "without serving.disaggregation",
        "ttft_percentiles": "without serving.disaggregation, or at a request rate",
        "sweep": "in sweep and search rows"}
KINDS = ("text", "int", "float", "bool")


@dataclass(frozen=True)
class Column:
    name: str
    unit: str  # "" for text and flags; "1" for a dimensionless number; "fraction" for one from 0 to 1
    modes: tuple[str, ...]
    kind: str  # text, int, float, bool
    better: str | None  # "max", "min" or None (an input, a label, or no preferred direction)
    label: str  # a short human name, without the unit (tables, axis labels)
    meaning: str
    when: str = ""  # a key of WHEN

    @property
    def maximize(self) -> bool | None:
        """True if larger is better, False if smaller is, None if neither."""
        return None if self.better is None else self.better == "max"

    @property
    def axis_label(self) -> str:
        """``label (unit)``; the label alone for a text column, a dimensionless count or a plain fraction."""
        return f"{self.label} ({self.unit})" if self.unit not in ("", "1", "fraction") else self.label


_M = {"t": "training", "i": "inference", "s": "serving"}


def _c(name: str, unit: str, modes: str, kind: str, better: str | None, label: str, meaning: str,
       when: str = "") -> Column:
    return Column(name, unit, tuple(_M[m] for m in modes), kind, better, label, meaning, when)


# fmt: off
COLUMNS: tuple[Column, ...] = (
    # --- inputs: the design point ------------------------------------------------------------------------
    _c("model", "", "tis", "text", None, "model", "Model preset name (presets/models) or the model file's name."),
    _c("accelerator", "", "tis", "text", None, "accelerator", "Accelerator preset name (presets/accelerators)."),
    _c("network", "", "tis", "text", None, "network", "Network preset name (presets/networks): tiers, topologies, bandwidths."),
    _c("num_devices", "devices", "tis", "int", None, "devices", "Accelerators in the system."),
    _c("tp", "1", "tis", "int", None, "tp", "Tensor-parallel degree (with sequence parallelism when sequence_parallel)."),
    _c("pp", "1", "tis", "int", None, "pp", "Pipeline-parallel degree (stages)."),
    _c("dp", "1", "tis", "int", None, "dp", "Data-parallel degree: num_devices / (tp x pp x cp); serving: replicas."),
    _c("cp", "1", "tis", "int", None, "cp", "Context-parallel degree (the sequence split over devices, ring attention)."),
    _c("ep", "1", "tis", "int", None, "ep", "Expert-parallel degree of the MoE layers (1 for dense models)."),
    _c("attention_dp", "", "s", "bool", None, "attention DP", "Attention data-parallel over the tp ranks (each its own requests, every head); MLP and experts over all."),
    _c("microbatch_size", "sequences", "t", "int", None, "microbatch size", "Sequences per microbatch."),
    _c("virtual_stages", "1", "t", "int", None, "virtual stages", "Model chunks per pipeline stage (interleaved 1F1B); 1 is plain 1F1B."),
    _c("sequence_parallel", "", "t", "bool", None, "sequence parallel", "Megatron sequence parallelism on the tensor-parallel group."),
    _c("recompute", "", "t", "text", None, "recompute", "Activation recomputation: none, selective (attention core) or full (every layer)."),
    _c("zero_stage", "1", "t", "int", None, "ZeRO stage", "ZeRO/FSDP sharding over dp: 0 none, 1 optimizer states, 2 + gradients, 3 + weights."),
    _c("mode", "", "tis", "text", None, "mode", "Workload mode: training, inference (a static batch) or serving (continuous batching)."),
    _c("precision", "", "tis", "text", None, "precision", "GEMM-input (compute) precision, with narrower weights named (bf16, fp8, fp4; 'bf16, experts fp4')."),
    _c("seq_len", "tokens", "t", "int", None, "sequence length", "Tokens per training sequence."),
    _c("global_batch_size", "sequences", "t", "int", None, "global batch", "Sequences per optimizer step, over all data-parallel replicas."),
    _c("microbatches", "1", "t", "int", None, "microbatches", "Microbatches per pipeline per step: global_batch_size / (dp x microbatch_size)."),
    _c("kv_precision", "", "is", "text", None, "KV precision", "Precision of the KV cache (16-bit unless set: the engines' kv_cache_dtype auto)."),
    _c("input_len", "tokens", "is", "int", None, "input length", "Prompt tokens per request (the mean of a request mix)."),
    _c("output_len", "tokens", "is", "int", None, "output length", "Generated tokens per request (the mean of a request mix)."),
    _c("batch_size", "sequences", "i", "int", None, "batch size", "Sequences prefilled and decoded together (resolved when given as max)."),
    _c("concurrency", "requests", "s", "float", None, "concurrency", "Requests in flight (closed loop); at a request rate, the mean number in the system."),
    _c("engine", "", "s", "text", None, "engine", "Serving engine whose memory and scheduling defaults apply (vllm, sglang, trtllm, ...)."),
    _c("scheduler", "", "s", "text", None, "scheduler", "Engine scheduler: chunked prefill beside decodes, or prefill first."),
    _c("input_len_cv", "1", "s", "float", None, "input length CV", "Coefficient of variation of the prompt lengths (0: all equal)."),
    _c("output_len_cv", "1", "s", "float", None, "output length CV", "Coefficient of variation of the output lengths (0: all equal)."),
    _c("speculative_draft_tokens", "tokens", "s", "int", None, "draft tokens", "Speculative decoding: tokens drafted per step (0: none)."),
    _c("speculative_draft_layers", "layers", "s", "int", None, "draft layers", "Speculative decoding: layers of the draft model or head."),
    _c("speculative_draft_model", "", "s", "text", None, "draft model", "Speculative decoding: the draft model (empty: a head or none)."),
    _c("speculative_acceptance_rate", "fraction", "s", "float", None, "acceptance rate", "Speculative decoding: probability that a drafted token is accepted."),
    _c("request_rate_per_s", "requests/s", "s", "float", None, "request rate", "Poisson arrival rate of requests (open loop).", "open_loop"),
    _c("layers_per_stage", "layers", "tis", "int", None, "layers per stage", "Transformer layers on the busiest pipeline stage."),
    # --- training results ------------------------------------------------------------------------------
    _c("step_time_s", "s", "t", "float", "min", "step time", "Wall time of one optimizer step: the sum of the breakdown columns below."),
    _c("tokens_per_s", "tokens/s", "t", "float", "max", "throughput", "Training tokens per second over the whole system: global_batch_size x seq_len / step_time_s."),
    _c("tokens_per_s_per_device", "tokens/s per device", "t", "float", "max", "throughput", "tokens_per_s / num_devices."),
    _c("model_flops_per_step", "FLOP", "t", "float", None, "model FLOPs per step", "Model FLOPs of one step (PaLM convention: 6 x active parameters x tokens + attention; no recomputation)."),
    _c("mfu", "fraction of peak", "t", "float", "max", "MFU", "Model FLOPs utilisation: model FLOPs per second over the devices' dense peak at the workload precision."),
    _c("compute_time_s", "s", "t", "float", "min", "compute", "Forward, backward, recomputation and optimizer time of the busiest stage per step."),
    _c("exposed_comm_time_s", "s", "t", "float", "min", "exposed communication", "Communication not hidden behind compute: tp + cp + ep + pp + exposed dp."),
    _c("bubble_time_s", "s", "t", "float", "min", "pipeline bubble", "Pipeline fill and drain time per step."),
    _c("tp_comm_time_s", "s", "t", "float", "min", "tensor-parallel comm (exposed)", "Exposed tensor-parallel all-reduce / reduce-scatter + all-gather time per step."),
    _c("cp_comm_time_s", "s", "t", "float", "min", "context-parallel comm (exposed)", "Exposed context-parallel ring (KV exchange) time per step."),
    _c("ep_comm_time_s", "s", "t", "float", "min", "expert-parallel all-to-all (exposed)", "Exposed expert-parallel all-to-all (dispatch and combine) time per step."),
    _c("pp_comm_time_s", "s", "t", "float", "min", "pipeline send/recv", "Pipeline point-to-point activation transfers per step."),
    _c("dp_comm_exposed_time_s", "s", "t", "float", "min", "data-parallel comm (exposed)", "Data-parallel gradient reduction (and ZeRO-3 gathers) not hidden behind the backward pass."),
    _c("optimizer_time_s", "s", "t", "float", "min", "optimizer", "Optimizer update time per step (part of compute_time_s)."),
    _c("straggler_time_s", "s", "t", "float", "min", "waiting for the slowest device", "Expected wait for the slowest of the devices (per-step variability)."),
    _c("overhead_time_s", "s", "t", "float", "min", "fixed per-step overhead", "Fixed per-step host overhead (fitted by llmsim calibrate)."),
    _c("goodput_tokens_per_s", "tokens/s", "t", "float", "max", "goodput", "tokens_per_s x goodput_fraction: the useful rate after failures, restarts and checkpoints."),
    _c("goodput_fraction", "fraction", "t", "float", "max", "goodput fraction", "Share of wall time that advances training (Young-Daly checkpoint interval, published failure rates)."),
    _c("checkpoint_time_s", "s", "t", "float", "min", "checkpoint time", "Time to write one checkpoint at the reliability section's storage bandwidth."),
    _c("checkpoint_interval_s", "s", "t", "float", None, "checkpoint interval", "Optimal time between checkpoints (Young-Daly)."),
    _c("tp_tier", "", "t", "text", None, "tp tier", "Network tier the tensor-parallel group spans."),
    _c("dp_tier", "", "t", "text", None, "dp tier", "Network tier the data-parallel group spans."),
    # --- inference and serving results -----------------------------------------------------------------
    _c("ttft_s", "s", "is", "float", "min", "TTFT", "Time to first token: prefill (serving: mean, queueing included)."),
    _c("tpot_s", "s", "is", "float", "min", "TPOT", "Time per output token: mean decode step over the output."),
    _c("e2e_latency_s", "s", "is", "float", "min", "end-to-end latency", "Request latency: ttft_s + (output_len - 1) x tpot_s."),
    _c("queueing_delay_s", "s", "s", "float", "min", "queueing delay", "Mean wait before a request's prefill starts (part of ttft_s)."),
    _c("ttft_p50_s", "s", "s", "float", "min", "TTFT p50", "Median TTFT over the requests: their prompt lengths, their place in a wave; at a request rate the M/G/1 queue's wait.", "ttft_percentiles"),
    _c("ttft_p90_s", "s", "s", "float", "min", "TTFT p90", "90th-percentile TTFT over the requests (as ttft_p50_s).", "ttft_percentiles"),
    _c("ttft_p99_s", "s", "s", "float", "min", "TTFT p99", "99th-percentile TTFT over the requests (as ttft_p50_s).", "ttft_percentiles"),
    _c("tpot_p50_s", "s", "s", "float", "min", "TPOT p50", "Median of the requests' TPOT (their mean decode step; in waves, the wait for the wave's last prompt).", "colocated"),
    _c("tpot_p90_s", "s", "s", "float", "min", "TPOT p90", "90th percentile of the requests' TPOT (as tpot_p50_s).", "colocated"),
    _c("tpot_p99_s", "s", "s", "float", "min", "TPOT p99", "99th percentile of the requests' TPOT (as tpot_p50_s).", "colocated"),
    _c("requests_per_s", "requests/s", "s", "float", "max", "requests/s", "Completed requests per second over all replicas."),
    _c("throughput_tokens_per_s", "tokens/s", "is", "float", "max", "throughput", "Output tokens per second over all data-parallel replicas."),
    _c("throughput_tokens_per_s_per_device", "tokens/s per device", "is", "float", "max", "throughput", "throughput_tokens_per_s / num_devices."),
    _c("prefill_compute_time_s", "s", "i", "float", "min", "prefill compute", "Compute part of ttft_s."),
    _c("prefill_comm_time_s", "s", "i", "float", "min", "prefill communication", "Communication part of ttft_s."),
    _c("decode_compute_time_s", "s", "i", "float", "min", "decode compute", "Compute part of tpot_s."),
    _c("decode_comm_time_s", "s", "i", "float", "min", "decode communication", "Communication part of tpot_s."),
    _c("tp_collective", "", "ti", "text", None, "tp collective", "The tensor-parallel collective as timed: operation algorithm/protocol on tiers."),
    _c("dp_collective", "", "t", "text", None, "dp collective", "The data-parallel gradient collective as timed: operation algorithm/protocol on tiers."),
    _c("ep_collective", "", "t", "text", None, "ep collective", "The expert-parallel all-to-all as timed: operation algorithm/protocol on tiers."),
    _c("pp_collective", "", "t", "text", None, "pp collective", "The pipeline send/recv as timed: operation on tiers."),
    # --- memory ----------------------------------------------------------------------------------------
    _c("weights_gb", "GB", "ti", "float", "min", "weights", "Weights per device (after tp, pp, ep and ZeRO-3 sharding)."),
    _c("grads_gb", "GB", "t", "float", "min", "gradients", "Gradients per device (ZeRO-2/3 shard them)."),
    _c("optimizer_gb", "GB", "t", "float", "min", "optimizer states", "Optimizer states and master weights per device (ZeRO-1/2/3 shard them)."),
    _c("tokens_per_s_per_user", "tokens/s per user", "s", "float", "max", "speed per user", "Output tokens per second each request sees: 1 / tpot_s (x tokens per decode step)."),
    _c("tokens_per_decode_step", "tokens", "s", "float", "max", "tokens per decode step", "Tokens kept per request per decode step (1 without speculative decoding).", ""),
    _c("running_requests_per_replica", "requests", "s", "float", None, "running per replica", "Mean requests decoding on one replica."),
    _c("max_running_requests_per_replica", "requests", "s", "int", None, "max running per replica", "Most requests one replica runs at once (engine's max_seqs, the KV cache)."),
    _c("kv_cache_occupancy", "fraction", "s", "float", None, "KV cache occupancy", "Share of the free KV-cache memory the running requests hold."),
    _c("kv_cache_gb", "GB", "is", "float", "min", "KV cache", "KV cache per device at the batch's (serving: the running requests') context."),
    _c("activations_gb", "GB", "ti", "float", "min", "activations", "Activations per device (training: with recomputation and fragmentation; inference: workspace)."),
    _c("reserved_gb", "GB", "ti", "float", "min", "runtime reserve", "Memory the runtime holds (CUDA context, communication buffers)."),
    _c("memory_per_device_gb", "GB", "tis", "float", "min", "memory per device", "Peak memory per device of the reported stage: the memory columns added up."),
    _c("memory_stage", "", "t", "text", None, "memory stage", "Pipeline stage whose memory is reported: first or last (pp = 1: first)."),
    _c("fits_in_memory", "", "tis", "bool", None, "fits in memory", "memory_per_device_gb is within the accelerator's HBM capacity."),
    # --- a serving point at a request rate (open loop) -------------------------------------------------
    _c("utilization", "fraction", "s", "float", None, "utilization", "Offered load over capacity at the request rate (1 or more: the queue grows).", "open_loop"),
    # --- disaggregated prefill and decode pools --------------------------------------------------------
    _c("prefill_devices", "devices", "s", "int", None, "prefill devices", "Devices of the prefill pool.", "disaggregated"),
    _c("decode_devices", "devices", "s", "int", None, "decode devices", "Devices of the decode pool.", "disaggregated"),
    _c("prefill_replicas", "1", "s", "int", None, "prefill replicas", "Prefill replicas (prefill_devices / (prefill tp x pp)).", "disaggregated"),
    _c("decode_replicas", "1", "s", "int", None, "decode replicas", "Decode replicas (decode_devices / (decode tp x pp)).", "disaggregated"),
    _c("prefill_tp", "1", "s", "int", None, "prefill tp", "Tensor-parallel degree of a prefill replica.", "disaggregated"),
    _c("decode_tp", "1", "s", "int", None, "decode tp", "Tensor-parallel degree of a decode replica.", "disaggregated"),
    _c("prefill_ep", "1", "s", "int", None, "prefill ep", "Expert-parallel degree of the prefill pool.", "disaggregated"),
    _c("decode_ep", "1", "s", "int", None, "decode ep", "Expert-parallel degree of the decode pool.", "disaggregated"),
    _c("prefill_attention_dp", "", "s", "bool", None, "prefill attention DP", "Attention data-parallel in a prefill replica (as attention_dp).", "disaggregated"),
    _c("decode_attention_dp", "", "s", "bool", None, "decode attention DP", "Attention data-parallel in a decode replica (as attention_dp).", "disaggregated"),
    _c("kv_transfer_time_s", "s", "s", "float", "min", "KV transfer", "Time to move one request's KV cache from the prefill to the decode pool.", "disaggregated"),
    _c("kv_transfer_bytes", "B", "s", "float", "min", "KV transfer size", "Bytes of one request's KV cache moved between the pools.", "disaggregated"),
    _c("kv_transfer_tier", "", "s", "text", None, "KV transfer tier", "Slowest network tier between the pools.", "disaggregated"),
    _c("kv_transfer_exposed_s", "s", "s", "float", "min", "KV transfer (exposed)", "Part of kv_transfer_time_s after the prefill ends (layerwise transfer hides the rest).", "disaggregated"),
    _c("prefill_utilization", "fraction", "s", "float", None, "prefill utilization", "Share of time the prefill pool is busy.", "disaggregated"),
    _c("decode_utilization", "fraction", "s", "float", None, "decode utilization", "Share of the decode pool's capacity in use.", "disaggregated"),
    # --- cost ------------------------------------------------------------------------------------------
    _c("device_cost_usd", "USD", "tis", "float", "min", "device manufacturing cost", "Manufacturing cost of one device (chiplet cost model), when its inputs are known."),
    _c("device_price_usd", "USD", "tis", "float", "min", "device price", "Price paid per device (cost.device_price_usd, else the preset's list price, else its manufacturing cost)."),
    _c("network_capex_usd", "USD", "tis", "float", "min", "scale-out network capex", "Scale-out network capital cost (NICs, switches, cables)."),
    _c("system_capex_usd", "USD", "tis", "float", "min", "system capex", "Capital cost of the system: devices, hosts and network."),
    _c("system_power_w", "W", "tis", "float", "min", "system power (with PUE)", "System power at TDP, with the data centre's PUE."),
    _c("cost_per_hour_usd", "USD/h", "tis", "float", "min", "cost per hour", "Amortised capex plus energy per hour."),
    _c("energy_per_token_j", "J", "tis", "float", "min", "energy per token", "system_power_w over the token rate."),
    _c("cost_per_million_tokens_usd", "USD", "tis", "float", "min", "cost per million tokens", "cost_per_hour_usd over the tokens (training) or output tokens (inference, serving) per hour, per million."),
    _c("cost_per_million_goodput_tokens_usd", "USD", "t", "float", "min", "cost per million goodput tokens", "cost_per_million_tokens_usd / goodput_fraction."),
    # --- serving under an SLO --------------------------------------------------------------------------
    _c("slo_request_rate_per_s", "requests/s", "s", "float", "max", "SLO request rate", "Highest Poisson request rate whose p90 TTFT and TPOT meet the SLO (0: none).", "open_loop_slo"),
    _c("slo_concurrency", "requests", "s", "float", "max", "SLO concurrency", "Largest concurrency whose TTFT and TPOT meet the SLO (0: none).", "slo"),
    _c("slo_throughput_tokens_per_s_per_device", "tokens/s per device", "s", "float", "max", "SLO throughput", "Output tokens/s per device at slo_concurrency (SLO goodput).", "slo"),
    _c("slo_cost_per_million_tokens_usd", "USD", "s", "float", "min", "SLO cost per million tokens", "cost_per_hour_usd over the output tokens served at slo_concurrency, per million.", "slo"),
    _c("colocated_slo_throughput_tokens_per_s_per_device", "tokens/s per device", "s", "float", "max", "co-located SLO throughput", "The scenario's own split co-located on the same devices, at the same SLO (the comparison).", "disaggregated"),
    # --- sweep rows ------------------------------------------------------------------------------------
    _c("pareto_rank", "1", "tis", "int", "min", "Pareto rank", "Non-domination rank under the sweep's objectives (0: on the front).", "sweep"),
    _c("infeasible_reason", "", "tis", "text", None, "infeasible reason", "Why a point was not evaluated or does not fit (empty when it is feasible).", "sweep"),
)
# fmt: on

BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
_RANK = {c.name: i for i, c in enumerate(COLUMNS)}


def get(name: str) -> Column | None:
    """The declared column ``name``, or None (a sweep's grid-key and compare columns are not declared)."""
    return BY_NAME.get(name)


def for_mode(mode: str, *whens: str) -> list[Column]:
    """The columns a ``mode`` row has, in order: those always present and those of the ``whens`` given."""
    keep = {"", *whens}
    return [c for c in COLUMNS if mode in c.modes and c.when in keep]


def order(row: dict) -> dict:
    """``row`` with its columns in the declared order; a column not declared here is an error (a new
    output column is declared in ``COLUMNS`` first)."""
    unknown = [k for k in row if k not in _RANK]
    if unknown:
        raise KeyError(f"output columns not declared in llmsim/schema.py: {', '.join(unknown)}")
    return {k: row[k] for k in sorted(row, key=_RANK.__getitem__)}


def maximize(name: str) -> bool | None:
    """Whether larger is better for a column: declared ones from ``better``; a sweep's compare column
    (``x_vs_previous``, ``x_vs_first``, ``x_share``) as its base column ``x``; else None."""
    col = BY_NAME.get(name)
    if col is not None:
        return col.maximize
    for suffix in ("_vs_previous", "_vs_first", "_share"):
        if name.endswith(suffix) and name[: -len(suffix)] in BY_NAME:
            return BY_NAME[name[: -len(suffix)]].maximize
    return None


FIELDS = ("name", "unit", "modes", "kind", "better", "when", "meaning")


def rows(mode: str | None = None) -> list[dict]:
    """The schema as plain rows (``llmsim columns``): every column, or those of one mode."""
    cols = COLUMNS if mode is None else [c for c in COLUMNS if mode in c.modes]
    return [{"name": c.name, "unit": c.unit, "modes": " ".join(c.modes), "kind": c.kind,
             "better": c.better or "", "when": WHEN[c.when], "meaning": c.meaning} for c in cols]


def markdown() -> str:
    """docs/columns.md: the output columns, one table per group of modes."""
    out = ["# Output columns", "",
           "Generated by `llmsim columns --format markdown` from `llmsim/schema.py`; do not edit by hand",
           "(a test fails when the two drift). Every row llmsim writes (estimate, search, sweep) has these",
           "columns, in this order; a sweep's rows also carry a column per grid key that no column below",
           "names (its last key, e.g. `moe_gemm_kernel`) and, with `compare: X`, `X_vs_previous`,",
           "`X_vs_first` and `X_share`. Units are SI (GB = 1e9 bytes); `1` is a dimensionless number,",
           "`fraction` one from 0 to 1; `better` says whether larger (max) or smaller (min) is better, which",
           "`plot` uses when no direction is given.",
           "Renaming a column is a breaking change (CHANGELOG).", ""]
    out += ["| column | unit | modes | better | present | meaning |", "|---|---|---|---|---|---|"]
    for c in COLUMNS:
        modes = ", ".join(c.modes) if len(c.modes) < 3 else "all"
        meaning = c.meaning.replace("|", "\\|")
        out.append(f"| `{c.name}` | {c.unit or '-'} | {modes} | {c.better or ''} | {WHEN[c.when]} | {meaning} |")
    return "\n".join(out) + "\n"
