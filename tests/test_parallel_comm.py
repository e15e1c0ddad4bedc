"""Communication of the parallel dimensions and serving memory, worked by hand from the presets.

dgx-h100 (presets/networks/dgx-h100.yaml): NVLink 450 GB/s per direction x 0.82 achievable, 3.4 us per
step; InfiniBand 50 GB/s per GPU x 0.93 achievable = 46.5 GB/s, 14 us per step. p2p is one message
over the outermost level the pair spans, without the collective launch cost.
"""

import dataclasses

import numpy as np
import pytest

from llmsim.engine import calibration as cal
from llmsim.engine.inference import estimate_inference, phase_ops
from llmsim.engine.network.collectives import collective
from llmsim.engine.network.topology import path_of
from llmsim.engine.split import resolve_split
from llmsim.engine.training import estimate_training
from llmsim.engine.types import Network, Tier
from llmsim.spec.convert import network_values
from llmsim.study.records import load

IB_BW = 50e9 * 0.93
IB_LAT = 14e-6


def _one_tier(name: str, bw: float, latency: float, size: int = 65536) -> Network:
    return Network(name, (Tier(name, size, "switch", bw, latency),))


@pytest.mark.parametrize("v", [1, 2])
def test_interleaved_pipeline_sends_2v_messages_per_microbatch(registry, v):
    # default: llama3-70b, 64 H100, tp 8, pp 2, dp 4, seq 8192, batch 256, microbatch 1 -> 64 microbatches.
    # Ranks tp, cp, ep, dp, pp innermost first: pp neighbours are 8 * 4 = 32 ranks apart, in other nodes.
    # Each tp rank sends its 1/tp slice of the activation (Narayanan sec. 4.1): 8192 * 8192 * 2 B / 8 =
    # 16,777,216 B -> 14 us + 16,777,216 / 46.5e9 = 374.80 us; a microbatch crosses a stage boundary
    # forward and backward, v times each with interleaving (Narayanan sec. 2.2.2): 64 * 2 * v messages.
    out = estimate_training(load(None, registry, [f"parallel.virtual_stages={v}"]))
    p2p = IB_LAT + 8192 * 8192 * 2 / 8 / IB_BW
    assert out["microbatches"] == 64
    assert out["pp_comm_time_s"] == pytest.approx(64 * 2 * v * p2p, rel=1e-12)
    assert out["pp_collective"] == "p2p send-recv/simple on infiniband"


def test_context_parallel_ring_passes_kv_chunks_under_attention(registry):
    # llama3-8b, cp 2 on one slow 1 GB/s link (x 0.82 achievable, no latency), seq 8192: each rank holds
    # 4096 tokens and passes K and V of its chunk once round the ring per layer forward (cp - 1 = 1 hop):
    # 4096 tokens x 2 x 8 kv heads x 128 x 2 B = 16,777,216 B / 0.82e9 = 20.46 ms, twice backward (dK, dV
    # too). What attention does not hide is exposed: per layer 3 x 20.46 ms less 3.5 attention forwards
    # (forward 1, backward 2.5: FlashAttention-2 does 2.5x the work), each under 4 x 4096 x 8192 x 4096 =
    # 0.55 TFLOP, 1.4 ms at 400 TFLOP/s: less than 8% of the 61 ms.
    sc = load(None, registry, ["model=llama3-8b", "system.num_devices=2", "parallel.tp=1", "parallel.pp=1",
                               "parallel.cp=2", "workload.seq_len=8192", "workload.global_batch_size=4"])
    sc = dataclasses.replace(sc, network=_one_tier("slow", 1e9, 0.0))
    out = estimate_training(sc)
    ring = 4096 * 2 * 8 * 128 * 2 / (1e9 * cal.SCALEUP_LINK_EFFICIENCY)
    full = out["microbatches"] * 32 * 3 * ring  # 4 microbatches x 32 layers
    assert full * 0.92 < out["cp_comm_time_s"] < full
    # on NVLink (369 GB/s) the same exchange (~56 us) hides under attention; what remains is attention
    # running 18.9% slower beside it (OVERLAP_COMPUTE_SLOWDOWN): 3 x ring x 0.189 / 1.189 per layer
    fast_net = _one_tier("fast", 450e9, 3.4e-6)
    fast = estimate_training(dataclasses.replace(sc, network=fast_net))
    hop = collective("p2p", 4096 * 2 * 8 * 128 * 2, path_of(fast_net, 1, 2)).time_s
    x = cal.OVERLAP_COMPUTE_SLOWDOWN
    assert fast["cp_comm_time_s"] == pytest.approx(fast["microbatches"] * 32 * 3 * hop * x / (1 + x), rel=1e-9)


def test_all_to_all_across_nodes_is_bound_by_each_ranks_nic(registry):
    # 1 GiB over 16 H100 in 2 DGX: each rank sends 8/16 of its buffer to the other node through its own
    # NIC, at the all-to-all's 0.85 of the 50 GB/s line rate (ALL_TO_ALL_SCALEOUT_EFFICIENCY, nccl-tests
    # and Megatron Core's dispatch): 2^29 / 42.5e9 = 12.633 ms, plus 15 pairwise steps at the mean step
    # latency of the levels (7/8 x 3.4 us on NVLink + 1/8 x 14 us on InfiniBand = 4.725 us) and the 7 us
    # launch: 12.711 ms. Inside one node (8 ranks) the same buffer takes 7/8 x 2^30 / (0.72 x 450 GB/s)
    # = 2.90 ms (ALL_TO_ALL_SCALEUP_EFFICIENCY). Over 64 ranks (8 nodes) 56/64 of it leaves the node: at
    # least 22.1 ms.
    a2a_ib = 50e9 * 0.85
    net = network_values(registry.get("networks", "dgx-h100"))
    two_nodes = collective("all_to_all", 2**30, path_of(net, 1, 16))
    assert two_nodes.algorithm == "pairwise"
    lat = 7 / 8 * 3.4e-6 + 1 / 8 * 14e-6
    assert two_nodes.time_s == pytest.approx(2**29 / a2a_ib + 15 * lat + cal.COLLECTIVE_BASE_LATENCY_S, rel=1e-9)
    one_node = collective("all_to_all", 2**30, path_of(net, 1, 8)).time_s
    assert one_node == pytest.approx(7 * 3.4e-6 + 7 / 8 * 2**30 / (450e9 * 0.72) + cal.COLLECTIVE_BASE_LATENCY_S,
                                     rel=1e-9)
    assert two_nodes.time_s > one_node
    assert collective("all_to_all", 2**30, path_of(net, 1, 64)).time_s >= 56 / 64 * 2**30 / a2a_ib


def test_hierarchical_all_to_all_sends_what_leaves_the_node_once(registry):
    # inside: the 8/16 of the buffer for the own node, pairwise over 8 NVLink ranks (7/8 of it);
    # across: an all-to-all of the whole buffer over the 2 nodes, which sends 1/2 of it over the NIC
    net = network_values(registry.get("networks", "dgx-h100"))
    r = collective("all_to_all", 2**30, path_of(net, 1, 16), algorithm="hierarchical")
    inner = 7 * 3.4e-6 + 7 / 8 * 2**29 / (450e9 * 0.72)
    outer = 1 * IB_LAT + 1 / 2 * 2**30 / (50e9 * 0.85)
    assert r.time_s == pytest.approx(inner + outer + cal.COLLECTIVE_BASE_LATENCY_S, rel=1e-9)


def _zero_sc(registry, zero: int, latency: float):
    # llama3-8b (32 layers) data-parallel over 8 ranks of one tier with a bandwidth so large that every
    # collective is its latency: a ring all-gather or reduce-scatter takes 7 steps, at the LL protocol's
    # 0.18 x the step latency (calibration.PROTOCOLS), so d(time)/d(latency) = 7 x 0.18 per collective
    sc = load(None, registry, ["model=llama3-8b", "system.num_devices=8", "parallel.tp=1", "parallel.pp=1",
                               f"parallel.zero_stage={zero}", "workload.seq_len=512",
                               "workload.global_batch_size=16"])  # 2 microbatches of 1 per rank
    return dataclasses.replace(sc, network=_one_tier("latency", 1e18, latency, size=8))


@pytest.mark.parametrize("zero, collectives", [
    # ZeRO-1: one reduce-scatter of the gradients, one all-gather of the weights, per step
    (1, 2),
    # ZeRO-3 / FSDP: per layer and microbatch, an all-gather for forward, another for backward and a
    # reduce-scatter (Zhao et al. 2023, sec. 3.2-3.3): 2 microbatches x 32 layers x 3 = 192
    (3, 2 * 32 * 3),
])
def test_data_parallel_collectives_pay_latency_per_call(registry, zero, collectives):
    # at 0.1 s and 0.2 s per step every collective outlasts the compute it could hide under, so the
    # exposed data-parallel time grows by (collectives x 7 x 0.18) x the latency step
    lo, hi = (estimate_training(_zero_sc(registry, zero, lat)) for lat in (0.1, 0.2))
    slope = (hi["dp_comm_exposed_time_s"] - lo["dp_comm_exposed_time_s"]) / 0.1
    assert slope == pytest.approx(collectives * 7 * cal.PROTOCOLS["ll"][0], rel=1e-9)
    assert hi["dp_collective"] == "reduce_scatter ring/ll on latency"


def _serve(registry, extra=()):
    return load(None, registry, ["workload.mode=inference", "workload.input_len=4096",
                                 "workload.output_len=1024", "workload.batch_size=32", *extra])


def test_mla_caches_the_latent_and_rope_key_once_per_token(registry):
    # DeepSeek-V3 (61 layers) caches kv_lora_rank 512 + qk_rope_head_dim 64 values per token and layer,
    # on every tp rank (DeepSeek-V2, arXiv 2405.04434, sec. 2.1): 576 B in FP8. 32 sequences x (4096 +
    # 1024) tokens x 61 layers x 576 B = 5.757 GB (GQA with its 128 kv heads split over tp 8 would be
    # 2 x 16 x 128 = 4,096 B per token and layer: 7.1x more)
    sc = _serve(registry, ["model=deepseek-v3", "system.accelerator=h200-sxm", "system.network=dgx-h200",
                           "system.num_devices=8", "parallel.tp=8", "parallel.pp=1", "parallel.ep=8",
                           "workload.precision=fp8", "workload.kv_precision=fp8"])
    out = estimate_inference(sc)
    assert out["kv_cache_gb"] == pytest.approx(32 * 5120 * 61 * 576 / 1e9, rel=1e-12)
    # one decode step at 2,000 cached tokens, MLA absorbed as engines decode it (DeepSeek-V2 sec. 2.1.2,
    # FlashMLA): per device 128 / 8 = 16 heads score the 576-wide latent + RoPE key and sum the 512-wide
    # latent: 2 x 32 x 2000 x 16 x (576 + 512) = 2,228.2 MFLOP (the up-projected form, 192 + 128, would be
    # 655.36); it reads the latent cache 32 x 2000 x 576 B and the queries and outputs 32 x 16 x 1,088 x 2 B
    attention = next(op for op in phase_ops(sc, resolve_split(sc), 32, 1, 2000)[1] if op.name == "attention")
    assert attention.flops == pytest.approx(2 * 32 * 2000 * 16 * (576 + 512))
    assert attention.bytes == pytest.approx(32 * 2000 * 576 + 32 * 16 * 1088 * 2)


def test_kv_precision_halves_the_cache_and_speeds_decode(registry):
    # llama3-70b on 8 H100, tp 8: 8 kv heads / 8 = 1 per device, 2 (K, V) x 128 x 2 B = 512 B per token and
    # layer in bf16; 32 x 5120 tokens x 80 layers x 512 B = 6.711 GB; fp8 stores 1 B per value: 3.355 GB
    base = ["model=llama3-70b", "system.num_devices=8", "parallel.tp=8", "parallel.pp=1"]
    bf16 = estimate_inference(_serve(registry, base))
    fp8 = estimate_inference(_serve(registry, [*base, "workload.kv_precision=fp8"]))
    assert bf16["kv_cache_gb"] == pytest.approx(32 * 5120 * 80 * 512 / 1e9, rel=1e-12)
    assert fp8["kv_cache_gb"] == pytest.approx(bf16["kv_cache_gb"] / 2, rel=1e-12)
    assert fp8["tpot_s"] < bf16["tpot_s"] and fp8["ttft_s"] == bf16["ttft_s"]


def test_pipeline_parallel_serving_adds_a_hop_and_the_last_stage(registry):
    # llama3-405b (126 layers) in FP8, tp 8: pp 2 on 16 H100 against pp 1 on 8. A batch crosses the
    # stages in turn, each taken at the fullest stage's time (63 layers plus the output layer), so
    # pp x stage = the 126 layers of pp 1 plus the output layer once more, plus the hop between nodes:
    # prefill sends 8 x 2048 tokens x 16384 x 2 B / tp 8 = 67,108,864 B: 14 us + 1.4432 ms = 1.4572 ms;
    # decode 8 tokens' 32,768 B: 14 us + 0.70 us. The output layer on 8 sequences reads its 16384 x
    # 16032 FP8 weights (262.7 MB at 2.85 TB/s = 92 us) plus the norm and the sampling kernels.
    base = ["model=llama3-405b", "parallel.tp=8", "workload.precision=fp8", "workload.mode=inference",
            "workload.batch_size=8", "workload.input_len=2048", "workload.output_len=256"]
    one = estimate_inference(load(None, registry, [*base, "system.num_devices=8", "parallel.pp=1"]))
    two = estimate_inference(load(None, registry, [*base, "system.num_devices=16", "parallel.pp=2"]))
    assert two["layers_per_stage"] == 63
    head = 16384 * 16032 / (3.35e12 * cal.HBM_EFFICIENCY)
    prefill_hop = IB_LAT + 8 * 2048 * 16384 * 2 / 8 / IB_BW
    decode_hop = IB_LAT + 8 * 16384 * 2 / 8 / IB_BW
    assert head < two["ttft_s"] - one["ttft_s"] - prefill_hop < head + 50e-6
    assert head < two["tpot_s"] - one["tpot_s"] - decode_hop < head + 50e-6
    # each stage holds half the weights: 405e9 params / 16 devices at 1 B, within the embedding's share
    assert two["weights_gb"] == pytest.approx(one["weights_gb"] / 2, rel=0.01)
    assert np.isclose(two["kv_cache_gb"], one["kv_cache_gb"] / 2)
