"""Disaggregated prefill and decode pools (engine/disaggregation.py)."""

import dataclasses

import pytest
from conftest import assert_spec_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmsim.engine.disaggregation import disaggregated_point, exposed_transfer, kv_transfer, pool_curves
from llmsim.engine.serving import slo_capacity
from llmsim.engine.split import resolve_split
from llmsim.study import records as est

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
POOLS = "serving.disaggregation={prefill: {tp: 8}, decode: {tp: 8}}"


def _scenario(registry, devices=16, isl=1024, osl=256, extra=()):
    return est.load(None, registry, [
        "model=llama3-70b", f"system.num_devices={devices}", "system.network=dgx-h100", "parallel.tp=8",
        "parallel.pp=1", "workload.mode=serving", "workload.precision=fp8", "workload.kv_precision=fp8",
        f"workload.input_len={isl}",
        f"workload.output_len={osl}", "workload.concurrency=64", *extra])


def _free_network(sc):
    """The scenario with KV transfers of infinite bandwidth and no latency (the TP collectives unchanged)."""
    pools = dataclasses.replace(sc.serving.disaggregation, kv_transfer_free=True)
    return dataclasses.replace(sc, serving=dataclasses.replace(sc.serving, disaggregation=pools))


def test_kv_transfer_worked_by_hand(registry):
    # Llama 3 70B: 80 layers, 8 KV heads of 128, FP8 cache: K and V of a token in a layer 2 x 8 x 128 x 1 B
    # = 2,048 B, so 1,024 prompt tokens are 1,024 x 80 x 2,048 = 167,772,160 B. Prefill tp 8: each device
    # holds one KV head: 1,024 x 80 x 256 B = 20,971,520 B, sent at once over its own link. 16 devices on
    # DGX H100 nodes of 8: the pools meet over InfiniBand, 50 GB/s per direction at the 0.93 link
    # efficiency (calibration.SCALEOUT_LINK_EFFICIENCY) = 46.5 GB/s, and 14 us (the preset):
    # 14e-6 + 20,971,520 / 46.5e9 = 14e-6 + 451.0e-6 = 0.4650 ms
    sc = _scenario(registry, extra=[POOLS, "serving.disaggregation.prefill_devices=8"])
    sub = dataclasses.replace(sc, num_devices=8)
    kv = kv_transfer(sc, resolve_split(sub).as_column(), 8, 8, 1024)
    assert kv["bytes"] == 167_772_160
    assert kv["tier"] == "infiniband" and kv["time_s"] == pytest.approx(14e-6 + 20_971_520 / 46.5e9)
    # links: 8 device pairs at once, 8 x 46.5e9 / 167,772,160 = 2,217 requests/s
    assert kv["capacity"] == pytest.approx(8 * 46.5e9 / 167_772_160)
    # 8 devices (4 + 4 of one node): NVLink, 450 GB/s x 0.82 = 369 GB/s per direction, 3.4 us; each of 4
    # devices sends 2 KV heads: 1,024 x 80 x 512 B = 41,943,040 B: 3.4e-6 + 41,943,040 / 369e9 = 0.1171 ms
    small = est.load(None, registry, [
        "model=llama3-70b", "system.num_devices=8", "parallel.tp=4", "parallel.pp=1", "workload.mode=serving",
        "workload.precision=fp8", "workload.kv_precision=fp8", "workload.input_len=1024", "workload.output_len=256",
        "workload.concurrency=8",
        "serving.disaggregation={prefill: {tp: 4}, decode: {tp: 4}, prefill_devices: 4}"])
    kv4 = kv_transfer(small, resolve_split(dataclasses.replace(small, num_devices=4)).as_column(), 4, 4, 1024)
    assert kv4["tier"] == "nvlink" and kv4["time_s"] == pytest.approx(3.4e-6 + 41_943_040 / 369e9)


def test_the_transfer_delays_every_token_after_the_first(registry):
    # TPOT as benchmarks measure it, (e2e - TTFT) / (O - 1): the decode step plus T_kv / (O - 1)
    sc = _scenario(registry, extra=[POOLS, "serving.disaggregation.prefill_devices=8"])
    slow, free = pool_curves(sc, 8), pool_curves(_free_network(sc), 8)
    assert free["kv"]["time_s"] == 0.0
    assert slow["tpot_s"][0] - free["tpot_s"][0] == pytest.approx(slow["kv"]["time_s"] / 255, rel=1e-3)


def test_layerwise_transfer_leaves_the_links_backlog_worked_by_hand():
    # 80 layers in one chunk, a 0.5 s prefill: a layer's K and V every 6.25 ms. A 40 ms transfer sends a
    # layer's share in 0.5 ms < 6.25 ms: only the last layer's 0.5 ms is left after the prefill. A 1 s
    # transfer (12.5 ms a layer) outruns the prefill: 1 - 0.5 x 79/80 = 0.50625 s is left. Sent whole
    # after the prefill, all of it is.
    assert exposed_transfer(0.04, 0.5, 80, True) == pytest.approx(0.0005)
    assert exposed_transfer(1.0, 0.5, 80, True) == pytest.approx(1.0 - 0.5 * 79 / 80)
    assert exposed_transfer(1.0, 0.5, 80, False) == 1.0


@SETTINGS
@given(isl=st.sampled_from([256, 4096, 16384]), network=st.sampled_from(["dgx-h100", "dgx-a100"]))
def test_a_layerwise_transfer_never_delays_decode_more(registry, isl, network):
    # the same bytes on the same links, started earlier: TPOT never higher at any rate, TTFT the same
    base = ["serving.disaggregation.prefill_devices=8", f"system.network={network}"]
    whole = pool_curves(_scenario(registry, isl=isl, extra=[POOLS, *base]), 8)
    layer = pool_curves(_scenario(registry, isl=isl, extra=[POOLS, *base,
                                                             "serving.disaggregation.kv_transfer=layerwise"]), 8)
    assert (layer["tpot_s"] <= whole["tpot_s"] + 1e-15).all()
    assert layer["ttft_s"] == pytest.approx(whole["ttft_s"])
    assert (layer["kv_exposed_s"] <= whole["kv"]["time_s"]).all()


def test_closed_loop_obeys_littles_law_and_goodput_stays_below_throughput(registry):
    sc = _scenario(registry, extra=[POOLS, "serving.slo_tpot_s=0.03"])
    out = disaggregated_point(sc)
    assert out["requests_per_s"] * out["e2e_latency_s"] == pytest.approx(64)
    assert out["prefill_devices"] + out["decode_devices"] == 16
    assert 0 < out["slo_throughput_tokens_per_s_per_device"]
    assert out["slo_throughput_tokens_per_s_per_device"] <= pool_curves(sc, 8)["capacity"] * 256 / 16


@SETTINGS
@given(isl=st.sampled_from([256, 1024, 4096]), osl=st.sampled_from([64, 256, 1024]),
       slo_tpot=st.sampled_from([0.015, 0.02, 0.03, 0.05]))
def test_free_transfer_on_twice_the_devices_serves_at_least_the_colocated_tpot_slo_rate(registry, isl, osl,
                                                                                      slo_tpot):
    # The true statement: a co-located replica's decode, moved to a replica of its own (twice the devices,
    # the prompts on the other) with free KV transfer, meets any TPOT SLO the co-located replica meets at
    # at least its request rate: its steps lose the prompt chunks beside them, t(n, 0) <= t(n, c).
    # At the SAME device count it is false (docs/methodology.md 6.1): the pools are whole replicas, one
    # idles while the other is the bottleneck, and the decode pool holds every KV cache alone. With a
    # TTFT SLO it is false in this model too: a prefill replica's step also carries the prompt tokens
    # arriving during it, the co-located model counts those at the (shorter) decode step's rate.
    slo = [f"serving.slo_tpot_s={slo_tpot}"]
    colocated = _scenario(registry, devices=8, isl=isl, osl=osl, extra=slo)
    rate_c = slo_capacity(colocated, resolve_split(colocated).as_column(), isl, osl, 8)[
        "slo_throughput_tokens_per_s_per_device"] * 8 / osl
    disagg = _free_network(_scenario(registry, devices=16, isl=isl, osl=osl,
                                     extra=[*slo, POOLS, "serving.disaggregation.prefill_devices=8"]))
    rate_d = disaggregated_point(disagg)["slo_throughput_tokens_per_s_per_device"] * 16 / osl
    assert rate_d >= rate_c * (1 - 1e-2)  # within the rate grid's resolution


def test_at_the_same_device_count_colocation_can_serve_more(registry):
    # Llama 3 70B FP8, 16 H100, tp 4 pools, 1,024 in / 1,024 out, TPOT <= 30 ms: the best split (4 prefill,
    # 12 decode devices) serves less per device than 4 co-located replicas: the prefill replica idles most
    # of the time, the co-located ones interleave prompts into decode steps that have room
    sc = est.load(None, registry, [
        "model=llama3-70b", "system.num_devices=16", "parallel.tp=4", "parallel.pp=1", "workload.mode=serving",
        "workload.precision=fp8", "workload.kv_precision=fp8", "workload.input_len=1024", "workload.output_len=1024",
        "workload.concurrency=64",
        "serving.slo_tpot_s=0.03", "serving.disaggregation={prefill: {tp: 4}, decode: {tp: 4}}"])
    rec = est.record(_free_network(sc))
    assert rec["slo_throughput_tokens_per_s_per_device"] < rec["colocated_slo_throughput_tokens_per_s_per_device"]


@SETTINGS
@given(slo_tpot=st.sampled_from([0.015, 0.02, 0.03, 0.05, None]), slo_ttft=st.sampled_from([0.25, 1.0, None]),
       rate=st.sampled_from([None, 1.0, 10.0]))
def test_goodput_never_exceeds_throughput(registry, slo_tpot, slo_ttft, rate):
    slo = [f"serving.slo_tpot_s={slo_tpot}"] * (slo_tpot is not None) + [f"serving.slo_ttft_s={slo_ttft}"] * (
        slo_ttft is not None)
    load = [] if rate is None else ["workload.concurrency=null", f"workload.request_rate_per_s={rate}"]
    for pools in ([], [POOLS]):
        rec = est.record(_scenario(registry, extra=[*slo, *load, *pools]))
        # the closed loop far past the running limit: the most the deployment serves
        peak = est.record(_scenario(registry, extra=[*pools, "workload.concurrency=100000"]))
        assert rec.get("slo_throughput_tokens_per_s_per_device", 0.0) <= peak["throughput_tokens_per_s_per_device"] * (
            1 + 1e-3)  # the rate grid's interpolation


@pytest.mark.parametrize("pools, key", [
    ("{prefill: {tp: 8}, decode: {tp: 8}, prefill_devices: 16}", "serving.disaggregation.prefill_devices"),
    ("{prefill: {tp: 8}, decode: {tp: 8}, prefill_devices: 4}", "serving.disaggregation.prefill_devices"),
    ("{prefill: {tp: 16}, decode: {tp: 8}}", "serving.disaggregation"),
    ("{prefill: {tp: 8}, decode: {tp: 0}}", "serving.disaggregation.decode.tp")])
def test_a_pool_that_does_not_fit_is_a_one_line_error_naming_the_file_and_key(tmp_path, pools, key):
    assert_spec_error(tmp_path, "model: llama3-70b\nsystem: {accelerator: h100-sxm, num_devices: 16, network: "
                      "dgx-h100}\nparallel: {tp: 8}\nworkload: {mode: serving, precision: fp8, input_len: 1024, "
                      f"output_len: 256, concurrency: 8}}\nserving:\n  disaggregation: {pools}\n", key)


@pytest.mark.parametrize("load", ["workload.concurrency=1", "workload.request_rate_per_s=0.01",
                                  "workload.request_rate_per_s=100"])
def test_light_load_has_the_unloaded_latencies(registry, load):
    # below the lowest rate of the pool curves (1e-3 of capacity) the latencies are the unloaded ones and
    # the load follows from Little's law: TTFT positive, no larger than its p90, E2E = TTFT + (O - 1) TPOT
    # (found by review: one request in flight gave a negative TTFT from an extrapolated rate)
    sc = est.load(None, registry, ["model=llama3-8b", "system.num_devices=256", "parallel.tp=1", "parallel.pp=1",
                                   "workload.mode=serving", "workload.input_len=128", "workload.output_len=4096",
                                   "serving.disaggregation={prefill: {tp: 1}, decode: {tp: 1}, prefill_devices: 8}",
                                   load])
    out = disaggregated_point(sc)
    assert out["ttft_s"] > 0 and out["ttft_s"] <= out.get("ttft_p90_s", out["ttft_s"])
    assert out["e2e_latency_s"] == pytest.approx(out["ttft_s"] + 4095 * out["tpot_s"], rel=0.02)
    assert out["concurrency"] == pytest.approx(out["requests_per_s"] * out["e2e_latency_s"], rel=1e-9)


def test_a_sweep_evaluates_each_row_as_estimate_does(registry, tmp_path):
    # every row of a disaggregated sweep is the deployment `llmsim estimate` gives for that row's values
    from conftest import run_cli

    spec = tmp_path / "s.yaml"
    spec.write_text("base:\n  model: llama3-70b\n  system: {accelerator: h100-sxm, num_devices: 16, network: dgx-h100}\n"
                    "  parallel: {tp: 8, pp: 1}\n"
                    "  workload: {mode: serving, precision: fp8, kv_precision: fp8, input_len: 1024, output_len: 256, concurrency: 64}\n"
                    "  serving: {disaggregation: {prefill: {tp: 8}, decode: {tp: 8}}}\n"
                    "grid:\n  workload.concurrency: [16, 64]\n  system.num_devices: [8, 16]\n"
                    "  serving.disaggregation.prefill_devices: [8]\nkeep: all\n")
    out = tmp_path / "out.json"
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1", "-o", str(out))
    assert r.returncode == 0, r.stderr
    import json

    rows = {(row["num_devices"], row["concurrency"]): row for row in json.loads(out.read_text())}
    # 8 devices: 8 prefill devices leave none to decode, and the row says so
    assert rows[(8, 16)]["infeasible_reason"] == ("serving.disaggregation.prefill_devices: 8 prefill devices "
                                                   "leave none of the 8 of system.num_devices to decode")
    for conc in (16, 64):
        one = est.record(_scenario(registry, extra=[POOLS, "serving.disaggregation.prefill_devices=8",
                                                    f"workload.concurrency={conc}"]))
        row = rows[(16, conc)]
        assert row["infeasible_reason"] is None
        for key in ("ttft_s", "tpot_s", "throughput_tokens_per_s_per_device", "kv_transfer_time_s"):
            assert row[key] == pytest.approx(one[key], rel=1e-12)
        assert (row["prefill_devices"], row["decode_devices"]) == (8, 8)


def test_search_picks_the_pools_tp_pair_with_the_cheapest_slo_tokens(registry):
    from conftest import run_cli

    r = run_cli("search", "--model", "llama3-70b", "--devices", "16", "--precision", "fp8",
                "--set", "workload.mode=serving", "--set", "workload.input_len=4096", "--set",
                "workload.output_len=256", "--set", "workload.concurrency=64", "--set", "serving.slo_tpot_s=0.02",
                "--set", "serving.slo_ttft_s=1", "--set", "parallel.tp=4", "--set", "parallel.pp=1",
                "--set", "serving.disaggregation={prefill: {tp: 4}, decode: {tp: 4}}", "--format", "json", "--jobs", "1")
    assert r.returncode == 0, r.stderr
    import json

    rows = json.loads(r.stdout)
    assert "16 splits" in r.stderr  # tp 1, 2, 4, 8 for each pool
    costs = [row["slo_cost_per_million_tokens_usd"] for row in rows]
    assert costs == sorted(costs)  # smallest first
    best = rows[0]
    # the winner is the estimate of its own pools (prefill_devices auto)
    one = est.record(est.load(None, registry, [
        "model=llama3-70b", "system.num_devices=16", "workload.precision=fp8", "workload.mode=serving",
        "workload.input_len=4096", "workload.output_len=256", "workload.concurrency=64", "serving.slo_tpot_s=0.02",
        "serving.slo_ttft_s=1", "parallel.tp=4", "parallel.pp=1",
        f"serving.disaggregation={{prefill: {{tp: {best['prefill_tp']}}}, decode: {{tp: {best['decode_tp']}}}}}"]))
    assert best["slo_cost_per_million_tokens_usd"] == pytest.approx(one["slo_cost_per_million_tokens_usd"], rel=1e-12)


def test_a_sweep_constraint_skips_rows_whose_pools_cannot_be_formed(tmp_path):
    # 16 prefill devices of 16 leave no decode pool: that row has no ttft_s for the constraint to read
    from conftest import run_cli

    spec = tmp_path / "s.yaml"
    spec.write_text("base:\n  model: llama3-70b\n  system: {accelerator: h100-sxm, num_devices: 16, network: dgx-h100}\n"
                    "  parallel: {tp: 8, pp: 1}\n"
                    "  workload: {mode: serving, precision: fp8, kv_precision: fp8, input_len: 1024, output_len: 256, concurrency: 64}\n"
                    "  serving: {disaggregation: {prefill: {tp: 8}, decode: {tp: 8}}}\n"
                    "grid:\n  serving.disaggregation.prefill_devices: [8, 16]\nconstraints: ['ttft_s < 5']\n")
    out = tmp_path / "out.csv"
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1", "-o", str(out))
    assert r.returncode == 0, r.stderr
    import pandas as pd

    d = pd.read_csv(out)
    assert len(d) == 1 and d["prefill_devices"].iloc[0] == 8 and d["ttft_s"].iloc[0] < 5
