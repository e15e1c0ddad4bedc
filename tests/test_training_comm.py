"""Hand-worked checks of TP overlap, low-precision casts, optimizer traffic and CP gradient groups."""

import pytest

from llmsim.engine import calibration as cal
from llmsim.engine.compute import gemm, layer_ops, low_precision_casts, op_time
from llmsim.engine.network.collectives import collective_time
from llmsim.engine.network.path import flat_path
from llmsim.engine.tensor_parallel import layer_tp_comm
from llmsim.engine.training import estimate_training
from llmsim.engine.types import Model
from llmsim.study.records import load

GPT_22B = Model("gpt-22b", 48, 6144, 24576, 64, 64, 96, 51200, "gelu", False, True)
GPT_22B_ARGS = dict(b=4, s=2048, tp=8, cp=1, precision="bf16", moe_layer=False, flash=False)


@pytest.fixture(scope="module")
def acc(registry):
    return load(None, registry, ["system.accelerator=a100-sxm-80gb"]).accelerator


def _windows(ops, acc):
    t = {op.name: op_time(op, acc, "bf16") for op in ops}
    return t["qkv_proj"], t["mlp_up"]


def test_backward_all_reduce_hides_under_weight_gradient(acc):
    ops = layer_ops(GPT_22B, sp=False, **GPT_22B_ARGS)
    w_attn, w_mlp = _windows(ops, acc)
    act = 4 * 2048 * 6144 * 2.0  # b*s*h 16-bit elements: 100.7 MB
    # the all-reduce is shorter than either wgrad GEMM: only the GEMMs' slowdown beside it shows, 2 x ar x
    # x / (1 + x) with x = OVERLAP_COMPUTE_SLOWDOWN (engine/overlap.py)
    fast = flat_path(1e15, 0.0, "nvlink", 8)
    tpc = layer_tp_comm(ops, act, 8, False, fast, acc, "bf16", overlap=False)
    x = cal.OVERLAP_COMPUTE_SLOWDOWN
    assert tpc.backward_s == pytest.approx(2 * collective_time("all_reduce", act, 8, fast) * x / (1 + x))
    assert tpc.forward_s == pytest.approx(2 * collective_time("all_reduce", act, 8, fast))
    slow = flat_path(1e9, 0.0, "slow", 8)  # 1 GB/s: each all-reduce (2*7/8*100.7 MB = 176 ms) outlasts its GEMM
    ar = collective_time("all_reduce", act, 8, slow)
    tpc = layer_tp_comm(ops, act, 8, False, slow, acc, "bf16", overlap=False)
    assert tpc.backward_s == pytest.approx(2 * ar - w_attn - w_mlp)


def test_sequence_parallel_backward_exposes_the_gradient_all_gathers(acc):
    ops = layer_ops(GPT_22B, sp=True, **GPT_22B_ARGS)
    act = 4 * 2048 * 6144 * 2.0
    fast = flat_path(1e15, 0.0, "nvlink", 8)
    ag = collective_time("all_gather", act, 8, fast)
    tpc = layer_tp_comm(ops, act, 8, True, fast, acc, "bf16", overlap=False)
    # the re-all-gather and the reduce-scatter hide under dgrad / wgrad (slowing them by x / (1 + x) of
    # their length); g's backward all-gather does not
    rs = collective_time("reduce_scatter", act, 8, fast)
    x = cal.OVERLAP_COMPUTE_SLOWDOWN
    assert tpc.backward_s == pytest.approx(2 * ag + 2 * (ag + rs) * x / (1 + x))


def test_fp8_casts_read_16_bit_and_write_two_8_bit_copies():
    # y[m, n] = x[m, k] w[k, n] with m = 8192, n = 4096, k = 2048: forward casts x: 8192 * 2048 elements
    # * (2 + 1 + 1) B = 67.1 MB; backward casts dy[m, n]: bwd_ratio = n / k = 2.
    (cast,) = low_precision_casts([gemm("g", 8192, 4096, 2048, 1.0)], "fp8")
    assert cast.bytes == pytest.approx(8192 * 2048 * 4.0)
    assert cast.bwd_ratio == pytest.approx(2.0)
    assert low_precision_casts([gemm("g", 8192, 4096, 2048, 2.0)], "bf16") == []


def test_optimizer_traffic_42_bytes_per_parameter(registry):
    # llama3-8b (8,030,261,248 params) on one H100 with dp = 1: 8.030e9 * 42 B / (3.35e12 * 0.85) = 0.11845 s
    sc = load(None, registry, ["model=llama3-8b", "system.num_devices=1", "parallel.tp=1", "parallel.pp=1",
                               "workload.global_batch_size=1", "workload.seq_len=1024"])
    out = estimate_training(sc)
    assert out["optimizer_time_s"] == pytest.approx(8_030_261_248 * 42 / (3.35e12 * cal.HBM_EFFICIENCY))


def test_optimizer_traffic_fp16_copies_gradients_into_fp32(registry):
    # fp16 gradients are copied into fp32 main gradients (read 2, write 4) and a 2-byte buffer is zeroed
    # instead of a 4-byte one: 42 + 6 - 2 = 46 B per parameter
    sc = load(None, registry, ["model=llama3-8b", "system.num_devices=1", "parallel.tp=1", "parallel.pp=1",
                               "workload.global_batch_size=1", "workload.seq_len=1024", "workload.precision=fp16"])
    out = estimate_training(sc)
    assert out["optimizer_time_s"] == pytest.approx(8_030_261_248 * 46 / (3.35e12 * cal.HBM_EFFICIENCY))
    assert out["grads_gb"] == pytest.approx(8_030_261_248 * 2 / 1e9)


def test_dp_reduces_fp32_gradients_and_gathers_bf16_weights(registry):
    # llama3-8b (N = 8.03e9 params) on dp = 2, one microbatch, over a 1 MB/s link without latency, so the
    # gradient collectives dwarf the compute they overlap with. Ring over k = 2: RS/AG move S/2, AR moves S.
    # ZeRO-0: all-reduce of fp32 grads = 4N/B. ZeRO-1: reduce-scatter of fp32 grads + all-gather of bf16
    # weights = 2N/B + N/B = 3N/B. ZeRO-3 (FSDP, 16-bit reduce): AG fwd + AG bwd + RS = 3 * N/B.
    import dataclasses
    exposed = {}
    for z in (0, 1, 3):
        sc = load(None, registry, ["model=llama3-8b", "system.num_devices=2", "parallel.tp=1", "parallel.pp=1",
                                   f"parallel.zero_stage={z}", "workload.global_batch_size=2",
                                   "workload.seq_len=1024"])
        slow = dataclasses.replace(sc.network, tiers=tuple(dataclasses.replace(t, bw_bytes_per_s=1e6, latency_s=0.0)
                                                           for t in sc.network.tiers))
        exposed[z] = estimate_training(dataclasses.replace(sc, network=slow))["dp_comm_exposed_time_s"]
    assert exposed[1] / exposed[0] == pytest.approx(0.75, rel=1e-3)
    assert exposed[3] / exposed[0] == pytest.approx(0.75, rel=1e-3)


def test_grad_reduce_dtype_sets_the_bytes_on_the_wire(registry):
    # as above (dp = 2, 1 MB/s, ring: RS/AG move S/2, AR moves S). ZeRO-0, bf16 gradients: all-reduce of
    # 2N bytes = 2N/B, half of auto's 4N/B. ZeRO-1, bf16: RS 2N/2 + AG of bf16 weights 2N/2 = 2N/B (0.5).
    # ZeRO-3 with fp32 reduction instead of FSDP's 16-bit: AG fwd N/B + AG bwd N/B + RS 4N/2/B = 4N/B (1.0).
    import dataclasses

    def exposed(z, dtype):
        sc = load(None, registry, ["model=llama3-8b", "system.num_devices=2", "parallel.tp=1", "parallel.pp=1",
                                   f"parallel.zero_stage={z}", f"parallel.grad_reduce_dtype={dtype}",
                                   "workload.global_batch_size=2", "workload.seq_len=1024"])
        slow = dataclasses.replace(sc.network, tiers=tuple(dataclasses.replace(t, bw_bytes_per_s=1e6, latency_s=0.0)
                                                           for t in sc.network.tiers))
        out = estimate_training(dataclasses.replace(sc, network=slow))
        return out["dp_comm_exposed_time_s"]

    ref = exposed(0, "auto")
    assert exposed(0, "fp32") == pytest.approx(ref, rel=1e-9)  # auto is fp32 with bf16 parameters
    assert exposed(0, "bf16") / ref == pytest.approx(0.5, rel=1e-3)
    assert exposed(1, "bf16") / ref == pytest.approx(0.5, rel=1e-3)
    assert exposed(3, "fp32") / ref == pytest.approx(1.0, rel=1e-3)


def test_zero_shards_over_data_and_context_parallel_ranks(registry):
    # ZeRO-3 over dp * cp = 2 * 2 = 4 ranks: 16-bit weights of llama3-8b = 8.030e9 * 2 B / 4 = 4.015 GB
    sc = load(None, registry, ["model=llama3-8b", "system.num_devices=4", "parallel.tp=1", "parallel.pp=1",
                               "parallel.cp=2", "parallel.zero_stage=3", "workload.global_batch_size=4",
                               "workload.seq_len=8192"])
    assert estimate_training(sc)["weights_gb"] == pytest.approx(8_030_261_248 * 2 / 4 / 1e9)


def test_ring_latency_mixes_tiers_by_hops(registry):
    from llmsim.engine.network.collectives import collective
    from llmsim.engine.network.topology import group_path
    net = load(None, registry, ["system.network=dgx-h100"]).network
    order = ("tp", "cp", "ep", "dp", "pp")
    # dp = 16 with tp = 1: 8 members per node on NVLink, then 2 nodes over InfiniBand
    path = group_path(net, order, {"tp": 1, "cp": 1, "ep": 1, "dp": 16, "pp": 1}, "dp")
    assert [(lv.tier, lv.ranks) for lv in path.levels] == [("nvlink", 8), ("infiniband", 2)]
    # a 1-byte ring all-reduce: 2 * 15 steps, 7 of every 8 on NVLink, 1 on IB, at dgx-h100's measured LL
    # steps (0.74 us NVLink, 7.33 us IB): 30 * (0.875 * 0.74 + 0.125 * 7.33) = 46.9125 us + 7 us launch
    ring = collective("all_reduce", 1, path, algorithm="ring")
    assert ring.protocol == "ll"
    assert ring.time_s == pytest.approx(53.9125e-6, rel=1e-3)
    # with tp = 8 every dp neighbour sits in another node: one InfiniBand level of 16
    path = group_path(net, order, {"tp": 8, "cp": 1, "ep": 1, "dp": 16, "pp": 1}, "dp")
    assert [(lv.tier, lv.ranks) for lv in path.levels] == [("infiniband", 16)]


def test_ops_table_for_training_adds_up_and_names_bounds():
    import csv
    import io

    from conftest import run_cli

    r = run_cli("estimate", "--ops", "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert sum(float(x["time_share"]) for x in rows) == pytest.approx(1.0)
    by_op = {x["op"]: x for x in rows}
    # llama3-70b default, mb 1 x 4096 tokens, tp 8: qkv GEMM intensity >> H100 ridge (989/3.35 = 295 FLOP/B)
    assert by_op["qkv_proj"]["bound"] == "compute" and float(by_op["qkv_proj"]["ridge_flop_per_byte"]) == \
        pytest.approx(989.4e12 / 3.35e12)
    assert by_op["attn_norm"]["bound"] == "memory"
    assert by_op["tp_comm (exposed)"]["bound"] == "network"
