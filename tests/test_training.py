"""Training model: hand-worked expectations and invariants."""

import dataclasses

import pytest

from llmsim.engine import calibration as cal
from llmsim.engine.memory import activation_bytes_per_layer, inflight_microbatches, state_bytes
from llmsim.engine.training import estimate_training, model_flops_per_token
from llmsim.estimate import load
from llmsim.spec.errors import SpecError
from llmsim.values import Model


@pytest.fixture(scope="module")
def default(registry):
    return load(None, registry, [])


def test_gpt3_flops_per_step_matches_narayanan_eq3(registry):
    # Narayanan et al. 2021 eq. 3 without the recompute forward (72 instead of 96):
    # F = 72 * B * s * l * h^2 * (1 + s/(6h) + V/(12*l*h)), B = 1536, s = 2048, l = 96, h = 12288,
    # V = 50257 -> 72*1536*2048*96*12288^2 = 3.2829e18 * (1 + 0.027778 + 0.003551) = 3.3858e18.
    sc = load(None, registry, ["model=gpt3-175b", "system.num_devices=1024", "parallel.pp=8",
                               "workload.seq_len=2048", "workload.global_batch_size=1536"])
    flops = model_flops_per_token(sc) * 1536 * 2048
    # llmsim also counts biases and norms (GPT-3 has them) and uses 6*N with N from the real shape:
    assert flops == pytest.approx(3.3858e18, rel=0.01)


def test_state_memory_7b_zero_stages():
    # 7e9 params, dp = 8. ZeRO-0: 16 B/param = 112 GB; ZeRO-1: 2 + 2 + 12/8 = 5.5 B = 38.5 GB;
    # ZeRO-2: 2 + (2 + 12)/8 = 3.75 B = 26.25 GB; ZeRO-3: 16/8 = 2 B = 14 GB (Rajbhandari et al. 2020 fig. 1).
    expected = {0: 112e9, 1: 38.5e9, 2: 26.25e9, 3: 14e9}
    for stage, total in expected.items():
        assert state_bytes(7e9, 8, stage).total == pytest.approx(total)


GPT_22B = Model("gpt-22b", 48, 6144, 24576, 64, 64, 96, 51200, "gelu", False, True)


def test_korthikanti_activation_memory_per_layer():
    # Korthikanti et al. 2022 eq. 1-2 and table 2, t = 1, with dropout, no flash attention:
    # none: s*b*h*(34 + 5*a*s/h); selective: 34*s*b*h; full: 2*s*b*h.
    s, b, h, a = 2048, 4, 6144, 64
    sbh = s * b * h
    args = dict(m=GPT_22B, b=b, s=s, tp=1, cp=1, sp=False, flash=False, dropout=True)
    assert activation_bytes_per_layer(recompute="none", **args) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert activation_bytes_per_layer(recompute="selective", **args) == pytest.approx(34 * sbh)
    assert activation_bytes_per_layer(recompute="full", **args) == pytest.approx(2 * sbh)
    # with tensor + sequence parallelism every term is divided by t (Korthikanti eq. 5): 34*sbh/t
    args.update(tp=8, sp=True)
    assert activation_bytes_per_layer(recompute="selective", **args) == pytest.approx(34 * sbh / 8)


def test_bubble_fraction(default, registry):
    # 1F1B: bubble / ideal = (p - 1) / m; interleaved: (p - 1) / (v * m) (Narayanan eq. 1-2).
    for v in (1, 2):
        sc = load(None, registry, ["parallel.pp=4", "parallel.tp=8", f"parallel.virtual_stages={v}",
                                   "workload.global_batch_size=64"])
        out = estimate_training(sc)
        m = out["microbatches"]  # 64 / dp(2) = 32
        per_mb = out["bubble_time_s"] * v / 3
        assert out["bubble_time_s"] / (m * per_mb) == pytest.approx(3 / (v * m))


def test_inflight_microbatches():
    assert inflight_microbatches(8, 64, 1) == 8  # first stage holds p microbatches
    assert inflight_microbatches(8, 4, 1) == 4  # never more than exist
    assert inflight_microbatches(4, 64, 2) == pytest.approx(4 * (1 + 3 / 8))


def test_default_scenario_outputs(default):
    out = estimate_training(default)
    assert 0 < out["mfu"] < 1 and out["fits_in_memory"]
    assert out["tokens_per_s"] == pytest.approx(256 * 8192 / out["step_time_s"])
    parts = (out["compute_time_s"] + out["exposed_comm_time_s"] + out["bubble_time_s"] + out["overhead_time_s"])
    assert parts == pytest.approx(out["step_time_s"])


@pytest.mark.parametrize("override, message", [
    (["parallel.tp=3"], "not divisible by tp*pp*cp"),
    (["model=llama2-13b", "parallel.tp=16", "parallel.pp=1"], "heads (40) are not divisible by tp (16)"),
    (["parallel.pp=64", "parallel.tp=1", "parallel.virtual_stages=2"], "exceeds layers"),
    (["workload.global_batch_size=7"], "global_batch_size (7) is not divisible"),
    (["parallel.ep=2"], "needs a mixture-of-experts model"),
])
def test_impossible_splits_are_errors(registry, override, message):
    sc = load(None, registry, override)
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        estimate_training(sc)


def test_uneven_pipeline_and_replicated_kv_are_not_errors(registry):
    # Llama 3 405B: 126 layers on 16 stages; 8 KV heads under tp = 16 (replicated)
    sc = load(None, registry, ["model=llama3-405b", "system.num_devices=2048", "parallel.tp=16",
                               "parallel.pp=16", "workload.global_batch_size=512"])
    out = estimate_training(sc)
    assert out["layers_per_stage"] == 8 and out["step_time_s"] > 0


def test_moe_model_runs_with_expert_parallelism(registry):
    sc = load(None, registry, ["model=mixtral-8x7b", "parallel.tp=2", "parallel.pp=1", "parallel.ep=8",
                               "workload.seq_len=4096", "workload.global_batch_size=256"])
    out = estimate_training(sc)
    assert out["ep_comm_time_s"] > 0 and 0 < out["mfu"] < 1


def test_free_communication_scales_linearly_with_dp(registry, monkeypatch):
    monkeypatch.setattr(cal, "STEP_OVERHEAD_S", 0.0)
    rates = []
    for n in (64, 128, 256):
        # ZeRO-0: the optimizer shard (and its time) does not shrink with dp
        sc = load(None, registry, [f"system.num_devices={n}", "parallel.tp=8", "parallel.pp=1", "parallel.zero_stage=0",
                                   f"workload.global_batch_size={n * 2}"])
        net = sc.network
        fast = dataclasses.replace(net, tiers=tuple(dataclasses.replace(t, bw_bytes_per_s=1e30, latency_s=0.0)
                                                    for t in net.tiers))
        rates.append(estimate_training(dataclasses.replace(sc, network=fast))["tokens_per_s"])
    assert rates[1] == pytest.approx(2 * rates[0], rel=1e-9) and rates[2] == pytest.approx(4 * rates[0], rel=1e-9)
