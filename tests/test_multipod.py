"""Systems of several pods or racks joined by a data-centre network tier, checked against PaLM 540B.

PaLM (Chowdhery et al. 2022, arXiv 2204.02311): 118 layers, d_model 18432, 48 heads of 256, d_ff = 4 d_model,
multi-query attention, SwiGLU, no biases, shared input/output embeddings, 256k vocabulary, 540.35B
parameters (sec. 2, Table 1); sequence 2048, batch 512 -> 1024 -> 2048 (sec. 5); 6144 TPU v4 chips in two
pods of 3072 over the DCN, 12-way model x 256-way fully sharded data parallelism in a pod, 2-way data
parallelism across pods, no pipeline, activations rematerialized in the backward (sec. 4); 238.3K tokens/s
at batch 2048, MFU 46.2% (HFU 57.8%) (sec. 4.1, Table 3); 1.95x one pod's throughput (sec. 4).
"""

import dataclasses

import pytest

from llmsim.engine.network.collectives import collective
from llmsim.engine.network.topology import path_of
from llmsim.engine.params import param_counts
from llmsim.spec.errors import SpecError
from llmsim.study.records import load, record

PALM = """\
model: {name: palm-540b, layers: 118, hidden: 18432, ffn_hidden: 73728, heads: 48, kv_heads: 1,
        head_dim: 256, vocab: 256000, activation: swiglu, tied_embeddings: true, bias: false}
system: {accelerator: tpu-v4, num_devices: 6144, network: tpu-v4-2x3072-dcn}
parallel: {tp: 12, pp: 1, microbatch_size: 4, recompute: full, zero_stage: 3}
workload: {mode: training, precision: bf16, seq_len: 2048, global_batch_size: 2048}
"""
DCN_BW = 6.25e9  # presets/networks/tpu-v4-2x3072-dcn.yaml, per chip per direction (line rate)


@pytest.fixture(scope="module")
def palm_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("palm") / "palm.yaml"
    path.write_text(PALM)
    return path


def test_palm_on_two_pods_reduces_gradients_over_dcn(registry, palm_path):
    sc = load(palm_path, registry, [])
    # Table 1: 540.35B; weights alone 118 x 4,539,285,504 + 256000 x 18432 = 540.354B, llmsim adds two
    # norm scales per layer (+4.4M; PaLM's parallel layer has one)
    assert param_counts(sc.model).total == pytest.approx(540.35e9, abs=0.01e9)
    out = record(sc)
    # dp derived 6144 / 12 = 512, 2048 / (512 x 4) = 1 microbatch per step
    assert (out["dp"], out["microbatches"], out["fits_in_memory"]) == (512, 1, True)
    # tp groups (12 consecutive chips) stay inside a pod; the dp group (512 ranks 12 apart) spans both
    assert out["tp_tier"] == "ici"
    assert out["dp_tier"] == "dcn" and out["dp_collective"].endswith(" on ici+dcn")
    # model FLOPs per token from sec. 4.1: 46.2% x 6144 x 275 TFLOP/s / 238.3K tokens/s = 3.2757e12
    # (6N + 12LHQT, app. B); MFU rounded to 0.1% -> rel 0.2%
    tokens = 2048 * 2048
    assert out["model_flops_per_step"] / tokens == pytest.approx(0.462 * 6144 * 275e12 / 238.3e3, rel=2e-3)
    # a plausibility band around the measured 46.2%, not a calibration target (llmsim predicts ~32%:
    # PaLM's parallel attention/MLP layers and its 2D-finalized sharding are not modelled)
    assert 0.6 * 0.462 < out["mfu"] < 1.4 * 0.462


def test_two_pods_weak_scale_and_one_pod_network_refuses_6144_chips(registry, palm_path):
    # the 4096-chip tpu-v4-pod preset has no tier for 6144 chips: refused with one line naming the limit
    with pytest.raises(SpecError) as err:
        load(palm_path, registry, ["system.network=tpu-v4-pod"])
    assert "\n" not in str(err.value) and "exceeds the largest tier" in str(err.value) and "4096" in str(err.value)
    # one pod on half the batch (PaLM sec. 4: each pod runs half the batch): stays on ICI
    one = record(load(palm_path, registry, ["system.num_devices=3072", "workload.global_batch_size=1024"]))
    two = record(load(palm_path, registry, []))
    assert one["dp_tier"] == "ici" and one["dp"] == 256
    # PaLM measured 1.95x (sec. 4; its cross-pod reduce did not overlap the backward). llmsim hides the
    # per-layer ZeRO-3 collectives (ICI+DCN ~0.6 s + gathers) under the ~20 s backward, so ~2x (ZeRO-3
    # over 512 halves the optimizer step: a hair above 2). Not a DCN-speed test: the reduce stays hidden
    # until the DCN is ~300x slower; it fails if the second pod's step differs from the first's
    assert 1.9 < two["tokens_per_s"] / one["tokens_per_s"] < 2.01


@pytest.mark.parametrize("dcn_scale", [1.0, 0.01])
def test_gradient_reduce_scatter_is_bounded_by_each_chips_dcn_bytes(registry, palm_path, dcn_scale):
    # Each chip holds the bf16 gradients of its N / 12 parameters (ZeRO-3 reduces in 16 bits):
    # S = 540.35e9 / 12 x 2 B = 90.06 GB. Reduce-scattered over 512 ranks, a chip ends with S / 512 and the
    # other pod's 256 contributions to it must cross the DCN: at least S / 512 = 175.9 MB per chip in each
    # direction (PaLM sec. 4 sends the whole pod-level shard, 2 x that: 4 chips x 351.8 MB = 1.41 GB =
    # 1.31 GiB per host pair, its "approximately 1.3 GB"). Lower bound: 175.9 MB / 6.25 GB/s = 28.1 ms
    # (line rate, no latency). On the real preset ICI (0.6 s) dominates; with the DCN 100x slower the bound
    # (2.81 s) exceeds anything ICI alone takes, so a DCN left out or over-counted fails it.
    sc = load(palm_path, registry, [])
    net = sc.network
    dcn = dataclasses.replace(net.tiers[1], bw_bytes_per_s=net.tiers[1].bw_bytes_per_s * dcn_scale)
    net = dataclasses.replace(net, tiers=(net.tiers[0], dcn))
    path = path_of(net, 12, 512)  # dp ranks are tp = 12 apart
    assert [(lv.tier, lv.ranks) for lv in path.levels] == [("ici", 256), ("dcn", 2)]
    S = param_counts(sc.model).total / 12 * 2
    bound = S / 512 / (DCN_BW * dcn_scale)
    assert bound == pytest.approx(0.02814 / dcn_scale, rel=1e-3)
    assert collective("reduce_scatter", S, path).time_s >= bound


def test_gb200_racks_reduce_gradients_over_infiniband(registry):
    # gb200-nvl72: 72 GPUs per NVLink domain, InfiniBand between racks. llama3-70b, tp 8 (8 consecutive
    # GPUs), dp = n / 8 with members 8 apart: one rack (72) -> dp 9 inside NVLink; two racks (144) -> dp 18
    # spanning both, its reduce-scatter on nvlink+infiniband
    def run(n):
        return record(load(None, registry, ["model=llama3-70b", "system.accelerator=gb200",
                                            "system.network=gb200-nvl72", f"system.num_devices={n}",
                                            "parallel.tp=8", "parallel.pp=1", "workload.seq_len=8192",
                                            "workload.global_batch_size=144"]))
    one, two = run(72), run(144)
    assert (one["dp"], one["dp_tier"], one["tp_tier"]) == (9, "nvlink", "nvlink")
    assert (two["dp"], two["dp_tier"], two["tp_tier"]) == (18, "infiniband", "nvlink")
    assert two["dp_collective"].endswith(" on nvlink+infiniband") and two["fits_in_memory"]
