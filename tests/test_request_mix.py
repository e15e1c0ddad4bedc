"""The request mix of serving workloads (engine/request_mix.py): moments, M/G/1 tails, spec errors."""

import dataclasses

import numpy as np
import pytest
from conftest import assert_spec_error
from test_serving import _columns, _scenario

from llmsim.engine.request_mix import mg1_wait, mg1_wait_quantile, mix_moments
from llmsim.engine.types import Workload
from llmsim.study import records as est

W = Workload(mode="serving", precision="bf16", seq_len=1)


def test_moments_of_a_spread_worked_by_hand():
    # I: mean 1000, cv 0.5 -> sd 500, E[I^2] = 1000^2 + 500^2 = 1.25e6; O: mean 200, cv 1 -> sd 200,
    # E[O^2] = 200^2 + 200^2 = 8e4; independent: E[IO] = 1000 x 200 = 2e5
    w = dataclasses.replace(W, input_len_cv=0.5, output_len_cv=1.0)
    m = mix_moments(w, 1000, 200)
    # decode context (E[IO] + E[O^2]/2) / E[O] = (2e5 + 4e4) / 200 = 1200 (fixed lengths: 1000 + 100 = 1100)
    assert m["ctx"] == pytest.approx(1200.0)
    # prompt prefix E[I^2] / (2 E[I]) = 1.25e6 / 2000 = 625 (fixed: 500)
    assert m["keys"] == pytest.approx(625.0)
    # work I + O - 1 = 1199, sd sqrt(500^2 + 200^2) = 538.52 -> cv 0.44914
    assert m["work_cv"] == pytest.approx(538.516 / 1199, rel=1e-5)
    fixed = mix_moments(W, 1000, 200)
    assert (fixed["ctx"], fixed["keys"], fixed["work_cv"]) == (1100.0, 500.0, 0.0)


def test_moments_of_a_list_of_pairs_worked_by_hand(registry):
    # pairs (100, 50), (300, 150): means 200, 100; population sd 100 and 50 -> cv 0.5 each, correlation 1;
    # E[IO] = (100 x 50 + 300 x 150) / 2 = 25,000 = 200 x 100 + 1 x 100 x 50
    sc = est.load(None, registry, ["model=llama3-8b", "workload.mode=serving", "workload.concurrency=4",
                                   "workload.requests=[[100, 50], [300, 150]]"])
    w = sc.workload
    assert (w.input_len, w.output_len, w.input_len_cv, w.output_len_cv) == (200, 100, 0.5, 0.5)
    assert w.length_corr == pytest.approx(1.0)
    m = mix_moments(w, 200, 100)
    # ctx = (25,000 + (100^2 + 50^2) / 2) / 100 = (25,000 + 6,250) / 100 = 312.5
    assert m["ctx"] == pytest.approx(312.5)
    # work I + O - 1: 149 and 449, sd 150 around 299 -> cv 0.50167
    assert m["work_cv"] == pytest.approx(150 / 299)


def test_pollaczek_khinchine_worked_by_hand():
    # mu = 10/s, lambda = 8/s: rho 0.8; M/D/1 (cv 0): W = 0.8 / (2 x 10 x 0.2) = 0.2 s; M/M/1 (cv 1): 0.4 s
    assert mg1_wait(8.0, 10.0, 0.0) == pytest.approx(0.2)
    assert mg1_wait(8.0, 10.0, 1.0) == pytest.approx(0.4)
    # M/M/1 quantile: P(W > t) = 0.8 e^(-2 t) = 0.1 -> t = ln 8 / 2 = 1.0397 s
    assert mg1_wait_quantile(8.0, 10.0, 1.0, 0.9) == pytest.approx(np.log(8) / 2)
    # M/D/1: the same tail shape at half the mean: ln 8 / 4
    assert mg1_wait_quantile(8.0, 10.0, 0.0, 0.9) == pytest.approx(np.log(8) / 4)
    assert np.isinf(mg1_wait(10.0, 10.0, 0.5)) and np.isinf(mg1_wait_quantile(12.0, 10.0, 0.5, 0.5))


def test_a_spread_of_output_lengths_widens_ttft_tails_and_fills_more_cache(registry):
    from llmsim.engine.serving import open_loop
    from llmsim.engine.split import resolve_split

    base = ["workload.precision=fp8"]
    fixed = _scenario(registry, model="llama3-70b", devices=8, tp=8, extra=base)
    spread = _scenario(registry, model="llama3-70b", devices=8, tp=8,
                       extra=[*base, "workload.output_len={mean: 256, cv: 1.0}"])
    sp = resolve_split(fixed).as_column()
    a, b = open_loop(fixed, sp, 5.0, 1024, 256, 8), open_loop(spread, sp, 5.0, 1024, 256, 8)
    assert b["ttft_p99_s"] > a["ttft_p99_s"] and b["ttft_p90_s"] > a["ttft_p90_s"]
    # the same mean work, so the same throughput; more KV per running request (context 1024 + 256 vs + 128)
    assert b["throughput_tokens_per_s"] == pytest.approx(a["throughput_tokens_per_s"], rel=1e-4)
    assert _columns(spread, [64])["kv_cache_gb"][0] > _columns(fixed, [64])["kv_cache_gb"][0]


@pytest.mark.parametrize("lengths, key", [
    ("input_len: {mean: 1024, cv: -0.5}\n  output_len: 16", "workload.input_len.cv"),
    ("input_len: 128\n  output_len: {mean: 0, cv: 0.5}", "workload.output_len.mean"),
    ("requests: [[128, 16], [64, 0]]", "workload.requests.1.1")])
def test_a_bad_spread_is_a_one_line_error_naming_the_file_and_key(tmp_path, lengths, key):
    assert_spec_error(tmp_path, "model: llama3-8b\nsystem: {accelerator: h100-sxm, num_devices: 1, network: "
                      f"dgx-h100}}\nworkload:\n  mode: serving\n  concurrency: 4\n  {lengths}\n", key)
