"""`llmsim search`: every feasible split of a scenario, best first (a generated sweep).

Serving and inference scenarios search tp, pp and ep; the replicas (dp) fill the devices; disaggregated
serving searches the prefill and decode pools' tp (their sizes as ``prefill_devices`` says). With an SLO
(``serving.slo_ttft_s`` / ``slo_tpot_s``) the default ranking is the cost per million tokens at the
highest load that meets it: the goodput per dollar.

Searched: tp (powers of two within the scale-up domain that divide the heads), pp (divisors of the
device count up to the layer count), ep (powers of two dividing the expert count, MoE models only), cp
(1, 2, 4, 8 for sequences of 8,192 tokens or more, where context parallelism pays for its ring
exchange: Megatron-Core's context-parallel guide recommends it for long sequences), microbatch size
1/2/4, recompute none/selective/full and ZeRO stage 0-3; dp follows. Splits that are impossible or do
not fit in memory are dropped.
"""

from __future__ import annotations

import copy
from pathlib import Path

from llmsim.spec.sweep import SweepSpec

MAX_PP = 64
CP_MIN_SEQ = 8192
CPS = (1, 2, 4, 8)
MICROBATCHES = (1, 2, 4)
RECOMPUTE = ("none", "selective", "full")
ZERO = (0, 1, 2, 3)
VIRTUAL_STAGES = (1, 2, 4, 8)  # virtual_stages: auto in a searched scenario
SHOWN = ["tp", "pp", "dp", "ep", "cp", "microbatch_size", "recompute", "zero_stage", "step_time_s", "tokens_per_s",
         "mfu", "memory_per_device_gb", "cost_per_million_tokens_usd"]
SHOWN_SERVING = ["tp", "pp", "dp", "ep", "ttft_s", "tpot_s", "throughput_tokens_per_s_per_device",
                 "memory_per_device_gb", "cost_per_million_tokens_usd"]
SHOWN_POOLS = ["prefill_devices", "prefill_tp", "decode_devices", "decode_tp"]
SHOWN_SLO = ["slo_throughput_tokens_per_s_per_device", "slo_cost_per_million_tokens_usd"]
HEADERS = {"ttft_s": "TTFT s", "tpot_s": "TPOT s", "throughput_tokens_per_s_per_device": "tok/s/dev",
           "cost_per_million_tokens_usd": "$/Mtok", "slo_throughput_tokens_per_s_per_device": "SLO tok/s/dev",
           "slo_cost_per_million_tokens_usd": "SLO $/Mtok"}


def default_objective(sc) -> tuple[str, bool]:
    """(column, maximize) a search ranks by when none is given: training tokens/s; serving with an SLO the
    cost per million tokens at the highest load meeting it (goodput per dollar), without one throughput
    per device; a static inference batch throughput per device."""
    if sc.workload.mode == "training":
        return "tokens_per_s", True
    if sc.workload.mode == "serving" and sc.serving.has_slo:
        return "slo_cost_per_million_tokens_usd", False
    return "throughput_tokens_per_s_per_device", True


def shown(sc) -> list[str]:
    """The table columns of a search of ``sc``."""
    if sc.workload.mode == "training":
        return SHOWN
    slo = sc.workload.mode == "serving" and sc.serving.has_slo
    if sc.workload.mode == "serving" and sc.serving.disaggregation is not None:
        return SHOWN_POOLS + SHOWN_SERVING[4:] + (SHOWN_SLO if slo else [])
    return SHOWN_SERVING + (SHOWN_SLO if slo else [])


def search_spec(base: dict, source: str, sc, objective: str, maximize: bool) -> SweepSpec:
    """The sweep of ``base`` over the split axes, for scenario values ``sc`` (sizes, heads, layers)."""
    n, m = sc.num_devices, sc.model
    scale_up = sc.network.tiers[0].size
    tps = tuple(t for t in (1, 2, 4, 8, 16, 32, 64, 128) if t <= min(n, scale_up) and n % t == 0
                and m.heads % t == 0)
    pps = tuple(p for p in range(1, min(n, m.layers, MAX_PP) + 1) if n % p == 0)
    experts = m.moe.experts if m.moe else 1
    eps = tuple(e for e in (1, 2, 4, 8, 16, 32, 64, 128, 256) if e <= min(n, experts) and experts % e == 0)
    cps = tuple(c for c in CPS if c <= n) if sc.workload.seq_len >= CP_MIN_SEQ else (1,)
    data = copy.deepcopy(base)
    data.setdefault("parallel", {}).pop("dp", None)  # derived for each split
    if sc.workload.mode == "serving" and sc.serving.disaggregation is not None:
        # disaggregated: each pool's tp (pp 1), the pool sizes chosen per pair (prefill_devices auto unless set)
        axes = ((("serving", "disaggregation", "prefill", "tp"), tps),
                (("serving", "disaggregation", "decode", "tp"), tps))
        return SweepSpec(source, data, axes, (), (), (), ((objective, maximize),))
    if sc.workload.mode != "training":  # serving: the model split and the replicas (dp) it leaves
        axes = ((("parallel", "tp"), tps), (("parallel", "pp"), pps), (("parallel", "ep"), eps))
        return SweepSpec(source, data, axes, (), (), (), ((objective, maximize),))
    # a scenario's own fine-grained recompute modules (selective:<modules>) join the three modes
    recomputes = RECOMPUTE + ((sc.parallel.recompute,) if sc.parallel.recompute not in RECOMPUTE else ())
    axes = ((("parallel", "tp"), tps), (("parallel", "pp"), pps), (("parallel", "ep"), eps),
            (("parallel", "cp"), cps),
            (("parallel", "microbatch_size"), MICROBATCHES), (("parallel", "recompute"), recomputes),
            (("parallel", "zero_stage"), ZERO))
    if data["parallel"].get("virtual_stages") == "auto":  # searched like the other degrees
        axes += ((("parallel", "virtual_stages"), VIRTUAL_STAGES),)
    return SweepSpec(source, data, axes, (), (), (), ((objective, maximize),))


def base_of(path: str | Path | None, default: Path, overrides: list[str], registry) -> dict:
    """The scenario mapping (preset names kept) with the command-line overrides applied."""
    from llmsim.spec.load import apply_overrides, parse_override
    from llmsim.spec.yamlio import load_yaml

    data = copy.deepcopy(load_yaml(path if path is not None else default).data)
    apply_overrides(data, [parse_override(o) for o in overrides], registry)
    return data
