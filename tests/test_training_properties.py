"""Invariants of the training model (hypothesis)."""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmsim.engine.training import estimate_training
from llmsim.study.records import load

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

splits = st.sampled_from([(8, 1, 1), (8, 2, 1), (4, 4, 1), (2, 2, 2), (1, 4, 1), (8, 1, 2)])
models = st.sampled_from(["llama3-8b", "llama2-13b", "mixtral-8x7b", "gpt3-175b"])
recompute = st.sampled_from(["none", "selective", "full"])
zero = st.integers(0, 3)


def _scenario(registry, model, split, rc, z):
    tp, pp, cp = split
    return load(None, registry, [f"model={model}", f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}",
                                 f"parallel.recompute={rc}", f"parallel.zero_stage={z}",
                                 "workload.seq_len=4096", "workload.global_batch_size=128"])


@SETTINGS
@given(model=models, split=splits, rc=recompute, z=zero, factor=st.floats(1.0, 8.0))
def test_more_resources_never_slower(registry, model, split, rc, z, factor):
    sc = _scenario(registry, model, split, rc, z)
    base = estimate_training(sc)
    acc = sc.accelerator
    faster = [
        dataclasses.replace(sc, accelerator=dataclasses.replace(acc, hbm_bw_bytes_per_s=acc.hbm_bw_bytes_per_s * factor)),
        dataclasses.replace(sc, accelerator=dataclasses.replace(
            acc, peak_flops_per_s={k: v * factor for k, v in acc.peak_flops_per_s.items()},
            measured_matmul_flops_per_s={k: v * factor for k, v in acc.measured_matmul_flops_per_s.items()})),
        dataclasses.replace(sc, network=dataclasses.replace(sc.network, tiers=tuple(
            dataclasses.replace(t, bw_bytes_per_s=t.bw_bytes_per_s * factor) for t in sc.network.tiers))),
    ]
    for variant in faster:
        assert estimate_training(variant)["step_time_s"] <= base["step_time_s"] * (1 + 1e-12)


@SETTINGS
@given(model=models, split=splits, rc=recompute, z=zero)
def test_mfu_bounded_and_memory_above_weight_shard(registry, model, split, rc, z):
    out = estimate_training(_scenario(registry, model, split, rc, z))
    assert 0 < out["mfu"] <= 1
    assert out["memory_per_device_gb"] >= out["weights_gb"] > 0
    # the breakdown is that of the reported (busiest) stage and adds up to it; pp = 1 has one stage
    parts = sum(out[k] for k in ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "reserved_gb"))
    assert parts == pytest.approx(out["memory_per_device_gb"])
    assert out["memory_stage"] in (("first",) if split[1] == 1 else ("first", "last"))


@SETTINGS
@given(model=st.sampled_from(["llama3-8b", "llama2-13b", "mixtral-8x7b"]), split=splits, rc=recompute, z=zero,
       nodes=st.sampled_from([1, 2, 4]))
def test_more_gpus_at_fixed_global_batch_never_raise_per_gpu_throughput(registry, model, split, rc, z, nodes):
    # doubling dp at a fixed global batch halves each replica's microbatches: per-GPU work falls, the
    # per-step costs (bubble, gradient reduction, optimizer, overhead) do not, so tokens/s per GPU cannot rise
    tp, pp, cp = split
    per_gpu = []
    for n in (8 * nodes * cp * pp, 16 * nodes * cp * pp):
        sc = load(None, registry, [f"model={model}", f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}",
                                   f"parallel.recompute={rc}", f"parallel.zero_stage={z}", f"system.num_devices={n}",
                                   "workload.seq_len=4096", "workload.global_batch_size=1024"])
        per_gpu.append(estimate_training(sc)["tokens_per_s_per_device"])
    assert per_gpu[1] <= per_gpu[0] * (1 + 1e-9)


@SETTINGS
@given(split=splits, rc=recompute, z=zero, ep=st.sampled_from([1, 2, 4, 8]))
def test_more_experts_at_fixed_active_parameters_never_speed_a_step(registry, split, rc, z, ep):
    # Mixtral's top-2 of 8 experts, then 16 and 32 of the same size: the same active FLOPs per token, more
    # weights to keep, reduce and update, and fewer rows per expert GEMM
    tp, pp, cp = split
    steps = []
    for experts in (8, 16, 32):
        sc = load(None, registry, ["model=mixtral-8x7b", f"model.moe.experts={experts}", f"parallel.tp={tp}",
                                   f"parallel.pp={pp}", f"parallel.cp={cp}", f"parallel.ep={ep}",
                                   f"parallel.recompute={rc}", f"parallel.zero_stage={z}", "system.num_devices=64",
                                   "workload.seq_len=4096", "workload.global_batch_size=128"])
        steps.append(estimate_training(sc)["step_time_s"])
    assert steps[0] <= steps[1] * (1 + 1e-9) and steps[1] <= steps[2] * (1 + 1e-9)


@SETTINGS
@given(model=models, split=splits, z=zero, nodes=st.sampled_from([8, 64, 512, 2048]),
       rate=st.floats(0.0, 1e-3), bw=st.floats(1e7, 1e10), restart=st.floats(0.0, 3600.0))
def test_goodput_never_exceeds_throughput_and_equals_it_without_failures(registry, model, split, z, nodes, rate,
                                                                         bw, restart):
    sc = _scenario(registry, model, split, "selective", z)
    sc = dataclasses.replace(sc, num_devices=nodes * 8,
                             workload=dataclasses.replace(sc.workload, global_batch_size=nodes * 8))
    rel = dataclasses.replace(sc.reliability, failures_per_device_hour=rate, restart_s=restart,
                              checkpoint_write_bytes_per_s_per_device=bw)
    out = estimate_training(dataclasses.replace(sc, reliability=rel))
    assert 0.0 <= out["goodput_tokens_per_s"] <= out["tokens_per_s"]
    calm = estimate_training(dataclasses.replace(sc, reliability=dataclasses.replace(rel, failures_per_device_hour=0.0)))
    assert calm["goodput_tokens_per_s"] == calm["tokens_per_s"]


@SETTINGS
@given(split=splits, z=zero, cv=st.floats(0.0, 0.1))
def test_stragglers_grow_with_the_device_count_and_the_speed_spread(registry, split, z, cv):
    sc = _scenario(registry, "llama3-8b", split, "selective", z)
    rel = dataclasses.replace(sc.reliability, device_speed_cv=cv)
    def wait(n, r):
        at = dataclasses.replace(sc, num_devices=n, reliability=r,
                                 workload=dataclasses.replace(sc.workload, global_batch_size=n))
        out = estimate_training(at)
        return out["straggler_time_s"] / out["compute_time_s"]  # the wait per second of compute

    waits = [wait(n, rel) for n in (64, 1024, 16384)]
    assert waits[0] <= waits[1] <= waits[2]
    assert wait(1024, dataclasses.replace(rel, device_speed_cv=cv * 2)) >= waits[1]


MODULES = ("layernorm", "mla_up_proj", "moe_act", "mlp")


@SETTINGS
@given(model=st.sampled_from(["llama3-8b", "mixtral-8x7b", "deepseek-v2", "deepseek-v3"]),
       split=splits, fewer=st.sets(st.sampled_from(MODULES)), more=st.sets(st.sampled_from(MODULES), min_size=1),
       precision=st.sampled_from(["bf16", "fp8"]))
def test_recomputing_more_modules_never_keeps_more_or_runs_less(registry, model, split, fewer, more, precision):
    # modules A within B: B keeps no more activation bytes and spends no less compute (each module only
    # drops tensors and adds forwards); the core attention module rides along in both
    tp, pp, cp = split
    big = sorted(fewer | more)
    out = {}
    for name, mods in (("a", ["core_attn", *sorted(fewer)]), ("b", ["core_attn", *big])):
        sc = load(None, registry, [f"model={model}", f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.cp={cp}",
                                   "parallel.recompute=selective:" + "+".join(mods), f"workload.precision={precision}",
                                   "system.num_devices=64", "workload.seq_len=4096", "workload.global_batch_size=128"])
        out[name] = estimate_training(sc)
    assert out["b"]["activations_gb"] <= out["a"]["activations_gb"] * (1 + 1e-12)
    assert out["b"]["compute_time_s"] >= out["a"]["compute_time_s"] * (1 - 1e-12)
    assert out["b"]["tp_comm_time_s"] >= out["a"]["tp_comm_time_s"] * (1 - 1e-12)
