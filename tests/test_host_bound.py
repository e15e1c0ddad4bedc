"""Kernels launched one by one from PyTorch eager (``parallel.cuda_graphs: false``): a pass takes the longer of
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
    sc = load(None, registry, [*sets, f"parallel.cuda_graphs={str(graphs).lower()}"])
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
    # Qwen3-30B-A3B (128 experts, 16 per rank at ep 8), one 1,024-token sequence: 48 kernels forward (16 expert
    # GEMMs per projection) take 48 x 12.4 = 595 us to launch, more than the layer's GPU time
    moe = ["model=qwen3-30b-a3b", "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=8",
           "parallel.tp=1", "parallel.pp=1", "parallel.ep=8", "workload.seq_len=1024",
           "workload.global_batch_size=64", "workload.precision=fp8"]
    _, graphs = _times(registry, moe, True)
    _, eager = _times(registry, moe, False)
    assert graphs.moe_forward_s[0] < 595.2e-6
    assert eager.moe_forward_s[0] == pytest.approx(48 * 12.4e-6, rel=1e-9)


def test_the_step_of_an_eager_small_model_is_slower_and_never_faster(registry):
    from llmsim.engine.training import estimate_training

    fast = estimate_training(load(None, registry, [*SMALL, "parallel.cuda_graphs=true"]))
    slow = estimate_training(load(None, registry, [*SMALL, "parallel.cuda_graphs=false"]))
    # 8 microbatches x 16 layers x (64 + 127 us) of launches beyond the GPU time: ~24 ms more a step
    assert slow["step_time_s"] - fast["step_time_s"] == pytest.approx(0.0244, rel=0.1)
