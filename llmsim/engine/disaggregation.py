"""Disaggregated prefill and decode (``serving.disaggregation``): separate pools of replicas, each
request's KV cache sent from the one to the other (DistServe, Zhong et al. 2024, arXiv 2401.09670;
Splitwise, Patel et al. 2024, ISCA; Mooncake, Qin et al. 2024, arXiv 2407.00079; NVIDIA Dynamo).

At ``X`` requests/s over the deployment, ``R_p`` prefill replicas of capacity ``mu_p`` each (full steps of
``B`` prompt tokens, or one prompt alone when it is longer) and ``R_d`` decode replicas:

  TTFT  = w t_p(0, I'/w + c),  c = (X / R_p) I' t_p     its prompt in w chunks, each step beside the
                                           prompt tokens arriving meanwhile (as the co-located c_o), at
                                           most B; Poisson arrivals add the M/G/1 wait's quantile at the
                                           replica (Pollaczek-Khinchine, request_mix; DistServe sec. 3.1
                                           uses its M/D/1 case) to the percentiles
  T_kv  = p2p(I x KV bytes per token of a prefill device's layers and heads) over the slowest tier
          between the pools (network/collectives, one send-recv, every device its own link)
  TPOT  = t_d(n_d, 0) + T_kv / (O - 1)     the decode step of n_d running requests, no prompt tokens
                                           beside them; the transfer delays the second token
  n_d   = (X / R_d) (O - 1) t_d(n_d, 0)    Little's law in a decode replica, solved on a grid of n_d
  N     = X (TTFT + (O - 1) TPOT)          requests in flight (closed loop): X from N by interpolation

The capacity is the least of the prefill pool's, the decode pool's (its running limit) and the links';
past it the excess queues before prefill (Little's law). ``prefill_devices: auto`` evaluates every split
of the devices into whole replicas and keeps the one with the most SLO goodput per device (without an
SLO: the highest capacity).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from llmsim.engine.errors import DesignError
from llmsim.engine.forward import kv_bytes_per_token_layer
from llmsim.engine.kv_capacity import running_limit
from llmsim.engine.network.collectives import collective_columns
from llmsim.engine.network.topology import path_of, strides
from llmsim.engine.request_mix import mg1_wait_quantile, mix_moments
from llmsim.engine.serving import ITERATIONS, check_whole_prompts, step_time
from llmsim.engine.split import resolve_split
from llmsim.engine.types import Scenario

KEY = "serving.disaggregation"
# request rates evaluated per pool split, as fractions of its capacity: dense at both ends (the SLO
# bounds often fall near capacity); 160 points keep interpolation within 0.1% (tests)
RATES = np.unique(np.r_[np.geomspace(1e-3, 0.5, 80), 1 - np.geomspace(0.5, 1e-3, 80)])
DECODE_POINTS = 128  # running requests per decode replica evaluated, 1 to the running limit


def prefill_device_choices(sc: Scenario) -> list[int]:
    """Prefill pool sizes to evaluate: the one given, or every split into whole replicas of both pools."""
    d, n = sc.serving.disaggregation, sc.num_devices
    rp, rd = d.prefill_tp * d.prefill_pp, d.decode_tp * d.decode_pp
    if d.prefill_devices is not None:
        p = d.prefill_devices
        if p >= n:
            raise DesignError(f"{p} prefill devices leave none of the {n} of system.num_devices to decode",
                              path=f"{KEY}.prefill_devices")
        if p % rp or (n - p) % rd:
            raise DesignError(f"{p} prefill and {n - p} decode devices are not whole replicas of {rp} "
                              f"(prefill tp x pp) and {rd} (decode tp x pp)", path=f"{KEY}.prefill_devices")
        return [p]
    choices = [p for p in range(rp, n, rp) if (n - p) % rd == 0]
    if not choices:
        raise DesignError(f"system.num_devices {n} does not split into prefill replicas of {rp} and decode "
                          f"replicas of {rd} devices (tp x pp), at least one of each", path=KEY)
    return choices


def _pool(sc: Scenario, tp: int, pp: int, ep: int, attention_dp: bool, devices: int, name: str):
    """The scenario and split of one pool: ``devices`` devices in replicas of tp x pp, experts over ep,
    attention data-parallel or not."""
    sub = dataclasses.replace(sc, num_devices=devices, parallel=dataclasses.replace(
        sc.parallel, tp=tp, pp=pp, dp=None, cp=1, ep=ep, virtual_stages=1, attention_dp=attention_dp))
    try:
        return sub, resolve_split(sub).as_column()
    except DesignError as err:
        raise DesignError(f"{name} pool: {err.message}", path=f"{KEY}.{name}") from None


def kv_transfer(sc: Scenario, sp_prefill, prefill_devices: int, decode_replica_devices: int, input_len) -> dict:
    """Time to send one request's KV cache from its prefill replica to its decode replica: every prefill
    device sends the K and V of its layers and heads at once, each over its own link of the slowest tier
    between the pools (the tier that holds the whole deployment: two ranks half of it apart); a decode
    replica of fewer devices receives several shards per link. Also the links' capacity in requests/s
    (every device of the smaller pool sending or receiving at once)."""
    m, w = sc.model, sc.workload
    kvp = w.kv_cache
    senders = int(sp_prefill.tp[0] * sp_prefill.pp[0])
    shard = input_len * sp_prefill.layers_per_stage[0] * kv_bytes_per_token_layer(m, sp_prefill.tp[0], kvp)
    per_link = shard * max(1.0, senders / decode_replica_devices)
    path = path_of(sc.network, -(-sc.num_devices // 2), 2)
    links = min(prefill_devices, sc.num_devices - prefill_devices)
    total = input_len * m.layers * kv_bytes_per_token_layer(m, 1, kvp)  # every layer's K and V once
    if sc.serving.disaggregation.kv_transfer_free:
        return {"time_s": 0.0, "bytes": float(total), "capacity": np.inf, "tier": None}
    time = float(collective_columns("p2p", per_link, path).times[0])
    return {"time_s": time, "bytes": float(total), "capacity": links * path.levels[-1].bw_bytes_per_s / total,
            "tier": path.levels[-1].tier}


def exposed_transfer(t_kv, prefill_s, units, layerwise: bool):
    """The part of a KV transfer of ``t_kv`` seconds left after a prefill of ``prefill_s``: all of it when
    it starts after the prefill; layer by layer, each of the ``units`` (layers x chunks) produced every
    prefill_s / units and sent in t_kv / units, the link's backlog when the last one is done:
    max(t_kv / N, t_kv - prefill_s (N - 1) / N) (a pipeline of N stages of both lengths)."""
    if not layerwise:
        return t_kv
    return np.maximum(t_kv / units, t_kv - prefill_s * (units - 1) / units)


def pool_curves(sc: Scenario, prefill_devices: int) -> dict:
    """Every column of the deployment with ``prefill_devices`` prefill devices at each request rate of
    ``RATES`` x its capacity (arrays), and the pools' fixed values."""
    d, w, s = sc.serving.disaggregation, sc.workload, sc.serving
    isl, osl = float(w.input_len), float(w.output_len)
    decode_devices = sc.num_devices - prefill_devices
    scp, spp = _pool(sc, d.prefill_tp, d.prefill_pp, d.prefill_ep, d.prefill_attention_dp, prefill_devices, "prefill")
    scd, spd = _pool(sc, d.decode_tp, d.decode_pp, d.decode_ep, d.decode_attention_dp, decode_devices, "decode")
    mix = mix_moments(w, isl, osl)
    ctx, keys = float(mix["ctx"]), float(mix["keys"])
    prompt, budget = max(np.ceil(isl * (1 - s.prefix_cache_hit_rate)), 1.0), float(s.max_batch_tokens)

    # prefill replica: a prompt alone in w chunks; busy, each step also carries the prompt tokens that
    # arrive during it (lambda I' t, as the co-located model's c_o), up to full steps of B
    st_p = strides(scp.parallel.order, spp.degrees)
    check_whole_prompts(sc, prompt)
    # attention data-parallel: a rank's share of the budget a step (serving.py)
    ranks = d.prefill_tp if d.prefill_attention_dp else 1
    chunks = max(1.0, prompt / (budget / ranks)) if s.chunked_prefill else 1.0
    alone = chunks * float(step_time(scp, spp, st_p, np.zeros(1), np.array([prompt / chunks]), ctx, keys)[0])
    own_cap = max(budget / ranks, 1.0) if s.chunked_prefill else np.inf  # without chunks a prompt runs whole
    t_full = float(step_time(scp, spp, st_p, np.zeros(1), np.array([budget]), ctx, keys,
                             own=np.array([min(prompt, own_cap)]))[0])
    mu_p = max(1.0 / alone, budget / (prompt * t_full))  # requests/s per prefill replica
    r_p = int(spp.dp[0])

    # decode replica: the step of n running requests (no prompt tokens), at most its running limit
    lim = running_limit(scd, spd, np.array([isl]), np.array([osl]))
    top = int(max(min(int(lim["max_running"][0]), budget), 1))
    n = np.unique(np.round(np.geomspace(1, top, DECODE_POINTS)))
    t_d = step_time(scd, spd, strides(scd.parallel.order, spd.degrees), n, np.zeros(n.shape), ctx, keys)
    rate_d = n / ((osl - 1) * t_d)
    r_d = int(spd.dp[0])

    kv = kv_transfer(sc, spp, prefill_devices, int(spd.tp[0] * spd.pp[0]), isl)
    capacity = min(r_p * mu_p, r_d * float(rate_d[-1]), kv["capacity"])
    x = capacity * RATES
    per_rep = x / r_d
    tpot_step = np.interp(per_rep, rate_d, t_d)
    running = per_rep * (osl - 1) * tpot_step
    step = alone / chunks
    for _ in range(ITERATIONS):
        others = np.minimum(x / r_p * prompt * step, budget - prompt / chunks)
        step = step_time(scp, spp, st_p, np.zeros(x.shape), prompt / chunks + np.maximum(others, 0.0), ctx, keys,
                         own=np.full(x.shape, prompt / chunks))
    ttft = chunks * step
    p90 = ttft + mg1_wait_quantile(x / r_p, mu_p, w.input_len_cv, 0.9)
    kv_exposed = exposed_transfer(kv["time_s"], ttft, sc.model.layers * chunks, d.kv_transfer_layerwise)
    tpot = tpot_step + kv_exposed / (osl - 1)
    e2e = ttft + (osl - 1) * tpot
    kv_per_seq = lim["kv_per_seq_bytes"][0]
    return {
        "rate": x, "ttft_s": ttft, "kv_exposed_s": np.broadcast_to(kv_exposed, x.shape), "ttft_p90_s": p90,
        "tpot_s": tpot, "e2e_latency_s": e2e, "concurrency": x * e2e,
        "running_requests_per_replica": running, "capacity": capacity, "alone_s": alone,
        "prefill_capacity": r_p * mu_p, "decode_capacity": r_d * float(rate_d[-1]), "kv": kv,
        "max_running_requests_per_replica": int(lim["max_running"][0]), "kv_per_seq_bytes": kv_per_seq,
        "kv_free_bytes": float(lim["kv_free_bytes"][0]), "mu_p": mu_p, "prefill_replicas": r_p,
        "decode_replicas": r_d, "prefill_devices": prefill_devices, "decode_devices": decode_devices,
        "prefill_step_s": step, "prefill_fits": bool(running_limit(scp, spp, np.array([isl]), np.array([osl]))["max_running"][0] >= 1),
        "hbm_bytes": scd.accelerator.hbm_bytes,
    }


def _slo_best(c: dict, slo_ttft, slo_tpot, p90: bool) -> int | None:
    """Index of the highest rate of the curves ``c`` whose TTFT (mean, or p90 under Poisson arrivals)
    and TPOT meet the SLO; None when none does."""
    ttft = c["ttft_p90_s"] if p90 else c["ttft_s"]
    ok = (ttft <= (slo_ttft if slo_ttft is not None else np.inf)) & (c["tpot_s"] <= (slo_tpot or np.inf))
    return int(np.flatnonzero(ok)[-1]) if ok.any() else None


def _score(c: dict, sc: Scenario, p90: bool) -> float:
    s = sc.serving
    if s.slo_ttft_s is None and s.slo_tpot_s is None:
        return c["capacity"]
    best = _slo_best(c, s.slo_ttft_s, s.slo_tpot_s, p90)
    return -1.0 if best is None else float(c["rate"][best])


def best_split(sc: Scenario, p90: bool = False) -> dict:
    """The pool curves of the prefill pool size of ``prefill_device_choices`` that serves most (within
    the SLO when one is set)."""
    curves, refused = [], None
    for p in prefill_device_choices(sc):
        try:  # a pool size its split cannot form (ep over the pool's replicas) is skipped, not fatal
            curves.append(pool_curves(sc, p))
        except DesignError as err:
            refused = refused or err
    if not curves:
        raise refused
    return max(curves, key=lambda c: _score(c, sc, p90))


def disaggregated_point(sc: Scenario) -> dict:
    """The serving columns of the disaggregated deployment of ``sc`` at its concurrency (closed loop) or
    request rate (Poisson), with the pools and the KV transfer, and the SLO capacity when one is set."""
    w, s = sc.workload, sc.serving
    osl, n_dev = float(w.output_len), sc.num_devices
    poisson = w.request_rate_per_s is not None
    c = best_split(sc, poisson)
    rates = c["rate"]
    # below the lowest rate evaluated the curves hold their unloaded values (np.interp clamps), and the
    # rate follows from Little's law at that latency
    if poisson:
        x = min(w.request_rate_per_s, c["capacity"])
        at = lambda k: float(np.interp(x, rates, c[k]))
        queue = 0.0  # Poisson waits are in the percentiles
        n = x * at("e2e_latency_s")
    else:
        n = float(w.concurrency)
        x = (n / float(c["e2e_latency_s"][0]) if n <= c["concurrency"][0]
             else float(np.interp(n, c["concurrency"], rates)))
        at = lambda k: float(np.interp(x, rates, c[k]))
        queue = max(n / x - at("e2e_latency_s"), 0.0)  # beyond the capacity
    tpot, running = at("tpot_s"), at("running_requests_per_replica")
    e2e = at("e2e_latency_s") + queue
    kv_used = running * c["kv_per_seq_bytes"]
    out = {
        "dp": c["decode_replicas"], "ttft_s": at("ttft_s") + queue, "tpot_s": tpot, "e2e_latency_s": e2e,
        "queueing_delay_s": queue, "requests_per_s": x, "throughput_tokens_per_s": x * osl,
        "throughput_tokens_per_s_per_device": x * osl / n_dev, "tokens_per_s_per_user": 1.0 / tpot,
        "running_requests_per_replica": running,
        "max_running_requests_per_replica": c["max_running_requests_per_replica"],
        "kv_cache_occupancy": kv_used / c["kv_free_bytes"] if c["kv_free_bytes"] > 0 else np.inf,
        "kv_cache_gb": kv_used / 1e9, "memory_per_device_gb": (kv_used + c["hbm_bytes"] - c["kv_free_bytes"]) / 1e9,
        "fits_in_memory": c["prefill_fits"] and c["max_running_requests_per_replica"] >= 1,
        "concurrency": n, "prefill_devices": c["prefill_devices"], "decode_devices": c["decode_devices"],
        "prefill_replicas": c["prefill_replicas"], "decode_replicas": c["decode_replicas"],
        "prefill_tp": s.disaggregation.prefill_tp, "decode_tp": s.disaggregation.decode_tp,
        "prefill_ep": s.disaggregation.prefill_ep, "decode_ep": s.disaggregation.decode_ep,
        "prefill_attention_dp": s.disaggregation.prefill_attention_dp,
        "decode_attention_dp": s.disaggregation.decode_attention_dp,
        "kv_transfer_time_s": c["kv"]["time_s"], "kv_transfer_bytes": c["kv"]["bytes"],
        "kv_transfer_tier": c["kv"]["tier"], "kv_transfer_exposed_s": at("kv_exposed_s"),
        "prefill_utilization": x / c["prefill_capacity"],
        "decode_utilization": x / c["decode_capacity"],
    }
    if poisson:
        cap = c["capacity"]
        out.update(request_rate_per_s=w.request_rate_per_s, utilization=w.request_rate_per_s / cap)
        for q in (0.5, 0.9, 0.99):
            wait = mg1_wait_quantile(w.request_rate_per_s / c["prefill_replicas"], c["mu_p"], w.input_len_cv, q)
            out[f"ttft_p{int(q * 100)}_s"] = float(at("ttft_s") + wait)
        if w.request_rate_per_s >= cap:
            out.update(ttft_s=np.inf, e2e_latency_s=np.inf)
    if s.has_slo:
        best = _slo_best(c, s.slo_ttft_s, s.slo_tpot_s, poisson)
        x_slo = 0.0 if best is None else float(rates[best])
        out["slo_throughput_tokens_per_s_per_device"] = x_slo * osl / n_dev
        out["slo_request_rate_per_s" if poisson else "slo_concurrency"] = (
            x_slo if poisson else (0 if best is None else int(c["concurrency"][best])))
    return out
