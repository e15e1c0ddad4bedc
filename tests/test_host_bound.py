"""Kernels launched one by one from PyTorch eager (``parallel.cuda_graphs: none``): a pass takes the longer of
its GPU time and its launches' host time (12.4 us a kernel, measured: benchmarks/kernels/h200/launch.csv)."""

import dataclasses

import numpy as np
import pytest

from llmsim.engine.layer_times import layer_times
from llmsim.study.records import load

SMALL = ["model=llama3.2-1b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=64",
         "parallel.tp=8", "parallel.pp=1", "workload.seq_len=1024", "workload.global_batch_size=64",
         "parallel.microbatch_size=1"]


def _times(registry, sets, graphs: bool):
    sc = load(None, registry, [*sets, f"parallel.cuda_graphs={'full' if graphs else 'none'}"])
    one = np.array([1])
    tp, ep = np.array([sc.parallel.tp]), np.array([sc.parallel.ep])
    return sc, layer_times(sc, one, tp, one, ep, tp)


def test_a_small_model_on_many_gpus_waits_for_its_launches(registry):
    # Llama 3.2 1B, tp 8, one 1,024-token sequence: a layer is 10 kernels (two norms, qkv, attention, out
    # projection, two residual adds, up, activation, down), 60 us of GPU time forward and 121 us backward
    # with graphs; launched eagerly, 10 x 12.4 = 124 us forward and 2 x 10 x 12.4 = 248 us backward (two
    # kernels a backward op: input and weight gradient)
    _, graphs = _times(registry, SMALL, True)
    _, eager = _times(registry, SMALL, False)
    assert graphs.forward_s[0] == pytest.approx(60.0e-6, rel=0.02)
    assert graphs.backward_s[0] == pytest.approx(121.1e-6, rel=0.02)
    assert eager.forward_s[0] == pytest.approx(124.0e-6, rel=1e-9)
    assert eager.backward_s[0] == pytest.approx(248.0e-6, rel=1e-9)


def test_a_large_model_is_gpu_bound_either_way(registry):
    # Llama 3 70B, tp 8, a 4,096-token sequence: a layer's forward is ~2.7 ms of GPU time against 124 us of
    # launches, so launching eagerly changes nothing
    big = ["model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=64",
           "parallel.tp=8", "parallel.pp=1", "workload.seq_len=4096", "workload.global_batch_size=64"]
    _, graphs = _times(registry, big, True)
    _, eager = _times(registry, big, False)
    for f in dataclasses.fields(graphs):
        assert np.array_equal(np.asarray(getattr(graphs, f.name)), np.asarray(getattr(eager, f.name))), f.name


def test_a_fine_grained_moe_layer_without_graphs_is_host_bound(registry):
    # Qwen3-30B-A3B (128 experts, 16 per rank at ep 8), one 1,024-token sequence, 498 us of GPU time forward
    # with graphs. Launched eagerly, Megatron-Core's all-to-all dispatcher waits once for the token counts,
    # before the expert all-to-all. Before the wait: norms, qkv, attention, out projection, residual, router,
    # top-k, permute and two casts, 11 kernels, 136 us of launches under 154 us of GPU time. After it: 16 + 16
    # expert GEMMs, activation, unpermute, residual, two casts, 37 kernels, 37 x 12.4 = 459 us of launches
    # over 344 us of GPU time. So 154 + 459 = 612 us, more than the 48 x 12.4 = 595 us of launches alone: the
    # GPU idles after the wait while the host launches the experts.
    moe = ["model=qwen3-30b-a3b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=8",
           "parallel.tp=1", "parallel.pp=1", "parallel.ep=8", "workload.seq_len=1024",
           "workload.global_batch_size=64", "workload.precision=fp8"]
    _, graphs = _times(registry, moe, True)
    _, eager = _times(registry, moe, False)
    assert graphs.moe_forward_s[0] == pytest.approx(498e-6, rel=0.01)
    assert eager.moe_forward_s[0] == pytest.approx(153.6e-6 + 37 * 12.4e-6, rel=0.005)
    # the backward reuses the split sizes on the host: no wait, 2 x 48 x 12.4 = 1,190 us of launches
    assert eager.moe_backward_s[0] == pytest.approx(2 * 48 * 12.4e-6, rel=1e-9)
    # Transformer Engine graphs over attention and the router (Megatron-Core's scope for dropless MoE): 9 of
    # the 11 kernels before the wait replay from the graph, the pre-MLP norm and the permute are launched; the
    # backward launches the 39 eager kernels' gradients, 2 x 39 x 12.4 = 967 us, over 933 us of GPU time
    sc = load(None, registry, [*moe, "parallel.cuda_graphs=attention"])
    one = np.array([1])
    scoped = layer_times(sc, one, one, one, np.array([8]), one)
    assert scoped.moe_forward_s[0] == pytest.approx(eager.moe_forward_s[0], rel=1e-9)  # 154 > 2 x 12.4 before
    assert graphs.moe_backward_s[0] == pytest.approx(933e-6, rel=0.01)
    assert scoped.moe_backward_s[0] == pytest.approx(2 * 39 * 12.4e-6, rel=1e-9)


def test_the_step_of_an_eager_small_model_is_slower_and_never_faster(registry):
    from llmsim.engine.training import estimate_training

    fast = estimate_training(load(None, registry, [*SMALL, "parallel.cuda_graphs=full"]))
    slow = estimate_training(load(None, registry, [*SMALL, "parallel.cuda_graphs=none"]))
    # 8 microbatches x 16 layers x (64 + 127 us) of launches beyond the GPU time: ~24 ms more a step
    assert slow["step_time_s"] - fast["step_time_s"] == pytest.approx(0.0244, rel=0.1)


def test_a_dropless_moe_layer_waits_even_without_expert_parallelism(registry):
    # ep 1, tp 1: Megatron-Core's dispatcher still copies the token counts to the host before the grouped GEMM
    # (sync point "before_finish"), so the eager forward is two passes as at ep 8; with drop-and-pad (a
    # capacity factor) it never waits and the forward is one pass: max(GPU, all launches)
    base = ["model=qwen3-30b-a3b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=8",
            "parallel.tp=1", "parallel.pp=1", "parallel.ep=1", "workload.seq_len=2048",
            "workload.global_batch_size=64", "workload.precision=fp8"]
    one = np.array([1])
    got = {}
    for name, extra in (("dropless", []), ("capacity", ["model.moe.capacity_factor=1.25"])):
        sc = load(None, registry, [*base, *extra, "parallel.cuda_graphs=none"])
        full = load(None, registry, [*base, *extra, "parallel.cuda_graphs=full"])
        got[name] = (layer_times(sc, one, one, one, one, one), layer_times(full, one, one, one, one, one))
    # 128 local experts, 2,048 tokens: 2 x 128 expert GEMMs + 16 other kernels = 272 launches, 3.37 ms, so the
    # backward (2 x 3.37 ms of launches over 4.1 ms of GPU time) is host-bound and half of it is the forward's
    # launches; the forward's GPU time is 2.0 ms
    eager, graphs = got["dropless"]
    launches = eager.moe_backward_s[0] / 2
    assert launches == pytest.approx(272 * 12.4e-6, rel=1e-9)
    # the wait: attention and router (GPU-bound before it) cannot hide the experts' launches after it
    assert eager.moe_forward_s[0] > max(graphs.moe_forward_s[0], launches) * (1 + 1e-6)
    eager_c, graphs_c = got["capacity"]
    launches = eager_c.moe_backward_s[0] / 2
    assert eager_c.moe_forward_s[0] == pytest.approx(max(graphs_c.moe_forward_s[0], launches), rel=1e-9)


def test_graph_settings_are_for_gpus_and_auto_errors_name_the_key():
    from conftest import run_cli

    r = run_cli("estimate", "--accelerator", "tpu-v5p", "--set", "system.network=tpu-v5p-pod", "--devices", "64",
                "--set", "parallel.cuda_graphs=none")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "allowed: full" in r.stderr
    # no auto microbatch can repair an impossible split: one line naming the key, exit 2 (no traceback)
    r = run_cli("estimate", "--model", "llama3-8b", "--devices", "16", "--tp", "3", "--pp", "2",
                "--global-batch-size", "64", "--microbatch-size", "auto")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
