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
from llmsim.study import modes

MAX_PP = 64
CP_MIN_SEQ = 8192
CPS = (1, 2, 4, 8)
# short headers of the search table's serving columns
HEADERS = {"attention_dp": "adp", "decode_attention_dp": "dec adp", "ttft_s": "TTFT s", "tpot_s": "TPOT s", "throughput_tokens_per_s_per_device": "tok/s/dev",
           "cost_per_million_tokens_usd": "$/Mtok", "slo_throughput_tokens_per_s_per_device": "SLO tok/s/dev",
           "slo_cost_per_million_tokens_usd": "SLO $/Mtok"}


def default_objective(sc) -> tuple[str, bool]:
    """(column, maximize) a search ranks by when none is given: the scenario's mode's (``study/modes``)."""
    return modes.of(sc).default_objective(sc)


def shown(sc) -> list[str]:
    """The table columns of a search of ``sc``."""
    return modes.of(sc).shown(sc)


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
    mode = modes.of(sc)
    axes = mode.search_axes(sc, data, tps, pps, eps, cps)
    return SweepSpec(source, data, axes, (), (), mode.search_constraints(sc, data), ((objective, maximize),))


def base_of(path: str | Path | None, default: Path, overrides: list[str], registry) -> dict:
    """The scenario mapping (preset names kept) with the command-line overrides applied."""
    from llmsim.spec.load import apply_overrides, parse_override
    from llmsim.spec.yamlio import load_yaml

    data = copy.deepcopy(load_yaml(path if path is not None else default).data)
    apply_overrides(data, [parse_override(o) for o in overrides], registry)
    return data
