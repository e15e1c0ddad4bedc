"""Inference model: hand-worked decode and KV cache, properties, `max` batch, CLI."""

import dataclasses
import json

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmsim.engine import calibration as cal
from llmsim.engine.inference import estimate_inference, touched_experts
from llmsim.study.records import load

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _sc(registry, model="llama2-7b", acc="a100-sxm-80gb", net="dgx-a100", devices=1, tp=1, batch=1,
        isl=128, osl=128, extra=()):
    return load(None, registry, [
        f"model={model}", f"system.accelerator={acc}", f"system.network={net}", f"system.num_devices={devices}",
        f"parallel.tp={tp}", "parallel.pp=1", "parallel.dp=1", "workload.mode=inference",
        f"workload.batch_size={batch}", f"workload.input_len={isl}", f"workload.output_len={osl}", *extra])


def test_llama2_7b_batch1_decode_on_a100_is_weights_over_bandwidth(registry):
    out = estimate_inference(_sc(registry))
    # weights: 6.738e9 params x 2 B = 13.477 GB; achievable HBM 2.039 TB/s x 0.85 = 1.733 TB/s -> 7.776 ms
    weights_s = 13.4768e9 / (2.039e12 * 0.85)
    # one kernel per op: 8 per layer (two residual-add + RMSNorm kernels, qkv, attention, out_proj, up, act,
    # down) x 32 layers + 3 (final norm, logits, sampling) = 259 x 5.357 us (the serving engine's fitted
    # per-kernel cost) = 1.39 ms; the 4 x 32 + 1 = 129 GEMMs (qkv, out_proj, up, down; logits) take 4.0 us more
    # each (GEMM_FIXED_S) = 0.52 ms; their one row, padded to a 16-row tile, computes in under 1% of the
    # weights' memory time, which the compute/memory blend raises by less than 0.1%
    kernels_s = 259 * cal.INFERENCE_KERNEL_OVERHEAD_S + 129 * cal.GEMM_FIXED_S
    # KV cache at a mean context of ~192 tokens: 32 x 2 x 4096 x 2 B x 192 = 0.1 GB -> 0.06 ms; activations tiny
    assert out["weights_gb"] == pytest.approx(13.4768, rel=1e-3)
    assert out["tpot_s"] == pytest.approx(weights_s + kernels_s, rel=0.02)


def test_llama3_70b_kv_cache_at_8k_context(registry):
    # 80 layers x 8 KV heads x 128 dims x (K + V) x 2 bytes = 327,680 B per token; x 8192 = 2.684 GB
    sc = _sc(registry, model="llama3-70b", acc="h100-sxm", net="dgx-h100", isl=8191, osl=1)
    assert estimate_inference(sc)["kv_cache_gb"] == pytest.approx(2.68435456)
    # tp = 8 splits the 8 KV heads one per device: 0.3355 GB
    sc8 = _sc(registry, model="llama3-70b", acc="h100-sxm", net="dgx-h100", devices=8, tp=8, isl=8191, osl=1)
    assert estimate_inference(sc8)["kv_cache_gb"] == pytest.approx(2.68435456 / 8)


def test_moe_decode_reads_only_touched_experts():
    from llmsim.engine.types import Model, MoE

    m = Model("moe", 2, 1024, 4096, 8, 8, 128, 1000, "swiglu", False, False,
              moe=MoE(experts=64, top_k=2, shared_experts=0, expert_ffn_hidden=512, first_dense_layers=0,
                      capacity_factor=None))
    # one token touches exactly top_k = 2 experts; n tokens miss an expert with probability (1 - 2/64)^n
    assert touched_experts(m, 1, 1, 1) == pytest.approx(2.0)
    assert touched_experts(m, 32, 1, 1) == pytest.approx(64 * (1 - (62 / 64) ** 32))
    assert touched_experts(m, 10_000, 1, 1) == pytest.approx(64)


def test_touched_experts_of_a_column_equal_each_points_to_the_bit():
    # a sweep's column and `llmsim estimate`'s one point must agree bit for bit: (1 - k/E)^n by C pow
    import numpy as np

    from llmsim.engine.types import Model, MoE

    m = Model("moe", 2, 1024, 4096, 8, 8, 128, 1000, "swiglu", False, False,
              moe=MoE(experts=256, top_k=8, shared_experts=1, expert_ffn_hidden=512, first_dense_layers=0,
                      capacity_factor=None))
    tokens = np.arange(1, 4097)
    column = touched_experts(m, tokens, np.where(tokens % 2, 8, 32), 4)
    assert [float(x) for x in column] == [256 / ep * (1 - (1 - 8 / 256) ** (int(t) * 4))
                                          for t, ep in zip(tokens, np.where(tokens % 2, 8, 32), strict=True)]


def test_max_batch_fits_and_one_more_does_not(registry):
    sc = _sc(registry, model="llama3-8b", acc="h100-sxm", net="dgx-h100", batch="max", isl=2048, osl=2048)
    out = estimate_inference(sc)
    assert out["fits_in_memory"] and out["batch_size"] > 1
    more = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, batch_size=out["batch_size"] + 1))
    assert not estimate_inference(more)["fits_in_memory"]


models = st.sampled_from(["llama2-7b", "llama3-8b", "mixtral-8x7b"])


@SETTINGS
@given(model=models, batch=st.integers(1, 256), isl=st.integers(16, 4096), osl=st.integers(2, 1024),
       factor=st.floats(1.0, 4.0))
def test_tpot_grows_with_context_and_batch_and_never_with_bandwidth(registry, model, batch, isl, osl, factor):
    sc = _sc(registry, model=model, acc="h100-sxm", net="dgx-h100", batch=batch, isl=isl, osl=osl)
    base = estimate_inference(sc)["tpot_s"]
    longer = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, input_len=isl * 2))
    assert estimate_inference(longer)["tpot_s"] >= base
    bigger = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, batch_size=batch * 2))
    assert estimate_inference(bigger)["tpot_s"] >= base
    acc = sc.accelerator
    fast = dataclasses.replace(sc, accelerator=dataclasses.replace(acc, hbm_bw_bytes_per_s=acc.hbm_bw_bytes_per_s
                                                                    * factor))
    assert estimate_inference(fast)["tpot_s"] <= base * (1 + 1e-12)


def test_tpot_grows_with_batch_past_the_ridge_point(registry):
    # decode GEMMs of llama3-8b on H100 turn compute-bound near batch ~ ridge (989e12 / 3.35e12 = 295 tokens)
    t = [estimate_inference(_sc(registry, model="llama3-8b", acc="h100-sxm", net="dgx-h100", batch=b,
                                isl=16, osl=2))["tpot_s"] for b in (1024, 2048)]
    assert t[1] > 1.5 * t[0]


def test_e2e_latency_is_the_first_token_then_one_step_per_further_token(registry):
    # one output token is the prefill alone; each further token adds one decode step, and the last one
    # reads the longest context, so it costs at least the mean step (TPOT) and, with attention a minor
    # part of a llama2-7b batch-1 step at 1.1k tokens (KV 0.6 GB of 13.5 GB read), under 10% more
    out = {n: estimate_inference(_sc(registry, isl=1024, osl=n)) for n in (1, 256, 257)}
    assert out[1]["e2e_latency_s"] == out[1]["ttft_s"]
    step = out[257]["e2e_latency_s"] - out[256]["e2e_latency_s"]
    assert out[256]["tpot_s"] <= step <= 1.1 * out[256]["tpot_s"]
    assert out[257]["ttft_s"] == out[256]["ttft_s"]


def test_estimate_inference_cli_json_and_ops():
    args = ["estimate", "--mode", "inference", "--model", "llama3-8b", "--devices", "8", "--tp", "8", "--pp", "1",
            "--batch-size", "max", "--input-len", "1024", "--output-len", "256"]
    r = run_cli(*args, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["fits_in_memory"] and out["batch_size"] > 1
    r = run_cli(*args, "--ops", "--format", "csv")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("phase,op,flops,bytes,intensity_flop_per_byte,ridge_flop_per_byte,bound,time_s")
    assert any(line.startswith("decode step,attention,") and ",memory," in line for line in lines)
    assert any(",network," in line for line in lines)


def test_inference_without_lengths_is_a_one_line_error():
    r = run_cli("estimate", "--mode", "inference", "--set", "workload.batch_size=4")
    assert r.returncode == 2
    assert "input_len and output_len" in r.stderr and "Traceback" not in r.stderr


def test_per_gemm_activation_quantisation_adds_a_kernel_before_every_gemm():
    # Llama 3 8B layer at FP8, one decode token (b = 1, s = 1), tp 1. Fused (TensorRT-LLM class): the
    # RMSNorms and SwiGLU write the FP8 inputs of qkv, mlp_up and mlp_down; only the attention output gets a
    # quantisation kernel of its own (out_proj_quant). per_gemm (torchao): all four GEMM inputs get one,
    # each reading 2 bytes and writing 1 an element (qkv and mlp_up read the 4,096-wide hidden state,
    # out_proj the 4,096-wide attention output, mlp_down the 14,336-wide activation); the norms and the
    # activation then write 16 bits, one byte an element more.
    from llmsim.engine.compute import engine_ops, layer_ops
    from llmsim.spec.convert import model_values
    from llmsim.spec.presets import PresetRegistry

    m = model_values(PresetRegistry().get("models", "llama3-8b"))
    ops = layer_ops(m, 1, 1, 1, 1, False, "fp8", False, 1, flash=True)
    fused = {o.name: o for o in engine_ops(ops, "fp8")}
    per_gemm = {o.name: o for o in engine_ops(ops, "fp8", fused_quant=False)}
    assert sorted(n for n in fused if n.endswith("_quant")) == ["out_proj_quant"]
    assert sorted(n for n in per_gemm if n.endswith("_quant")) == ["mlp_down_quant", "mlp_up_quant",
                                                                  "out_proj_quant", "qkv_proj_quant"]
    assert per_gemm["qkv_proj_quant"].bytes == 4096 * 3 and per_gemm["mlp_down_quant"].bytes == 14336 * 3
    assert per_gemm["mlp_act"].bytes - fused["mlp_act"].bytes == 14336
    assert per_gemm["residual_attn_norm"].bytes - fused["residual_attn_norm"].bytes == 4096


def _tp_case(tp_all_reduce="auto"):
    from llmsim.spec.presets import PresetRegistry
    from llmsim.study import records as est

    return est.load(None, PresetRegistry(), ["model=llama2-7b", "system.accelerator=a100-sxm-80gb",
                                             "system.network=dgx-a100", "system.num_devices=8", "parallel.tp=8",
                                             "parallel.pp=1", "workload.mode=inference", "workload.batch_size=1",
                                             "workload.input_len=128", "workload.output_len=128",
                                             f"parallel.tp_all_reduce={tp_all_reduce}"])


def test_a_small_tp_all_reduce_runs_one_shot_by_hand():
    # one decode token of Llama 2 7B over tp 8 on a DGX A100: S = 4,096 x 2 bytes = 8,192. One-shot: one
    # kernel (INFERENCE_KERNEL_OVERHEAD_S) + one LL hop on NVLink (0.18 x 3.4 us = 0.612 us) + 7 peers'
    # 8,192 bytes over 300 GB/s x 0.82 (SCALEUP_LINK_EFFICIENCY, as NCCL's paths get it: 0.233 us); NCCL's
    # ring/LL takes 7.0 us + 14 steps x 1.34 us (dgx-a100's measured LL step) = 25.8 us (measured: 25.84)
    from llmsim.engine import calibration as cal
    from llmsim.engine.inference import tp_all_reduce

    one = cal.INFERENCE_KERNEL_OVERHEAD_S + 0.18 * 3.4e-6 + 7 * 8192 / (300e9 * 0.82)
    t, names = tp_all_reduce(_tp_case(), np.array([8]), np.array([1]), np.array([8192.0]))
    assert t[0] == pytest.approx(one, rel=1e-9) and names[0] == "all_reduce one-shot on nvlink"
    nccl, nccl_names = tp_all_reduce(_tp_case("nccl"), np.array([8]), np.array([1]), np.array([8192.0]))
    assert nccl[0] == pytest.approx(7.0e-6 + 14 * 1.34e-6, rel=0.02) and "ring" in nccl_names[0]
    # 64 MB: the one-shot's 7 x 64 MB read (1.5 ms) loses to the ring's 2 x 7/8 x 64 MB: NCCL kept
    big, big_names = tp_all_reduce(_tp_case(), np.array([8]), np.array([1]), np.array([64e6]))
    assert "one-shot" not in big_names[0] and big[0] < 7 * 64e6 / 300e9


def test_a_1_mib_all_reduce_over_tp_4_by_hand():
    # 1 MiB = 1,048,576 bytes over tp 4 inside a DGX A100 (NVLink 300 GB/s x 0.82 = 246 GB/s).
    # One-shot: INFERENCE_KERNEL_OVERHEAD_S (5.357 us as fitted) + 0.18 x 3.4 us = 0.612 us (one LL hop)
    #   + 3 peers x 1,048,576 B / 246e9 B/s = 12.788 us                 -> overhead + 13.400 us = 18.757 us.
    # NCCL's best here is ring/LL128: 7.0 us launch + 2 x 3 steps x 0.56 x 3.4 us = 11.424 us
    #   + 2 x 3/4 x 1,048,576 B / (246e9 x 0.92) = 6.950 us                       -> 25.374 us,
    # (ring/LL: 7.0 + 6 x 1.34 + 1.5 x 1,048,576 / 123e9 = 27.83 us; ring/Simple: 7.0 + 20.4 + 6.39 =
    # 33.8 us), so the one-shot wins by 6.62 us.
    from llmsim.engine.inference import tp_all_reduce

    size = np.array([1048576.0])
    t, names = tp_all_reduce(_tp_case(), np.array([4]), np.array([1]), size)
    assert t[0] == pytest.approx(cal.INFERENCE_KERNEL_OVERHEAD_S + 13.400e-6, rel=1e-4) and names[0] == "all_reduce one-shot on nvlink"
    nccl, nccl_names = tp_all_reduce(_tp_case("nccl"), np.array([4]), np.array([1]), size)
    assert nccl[0] == pytest.approx(25.374e-6, rel=1e-4) and nccl_names[0] == "all_reduce ring/ll128 on nvlink"
    # the same 4 ranks 8 apart sit in four nodes: no shared NVSwitch, so no one-shot (NCCL over InfiniBand)
    far, far_names = tp_all_reduce(_tp_case(), np.array([4]), np.array([8]), size)
    assert "one-shot" not in far_names[0] and "infiniband" in far_names[0] and far[0] > 25.374e-6


def test_mla_decodes_on_its_latent_cache_by_hand():
    # DeepSeek-R1 (128 heads, kv_lora_rank 512, RoPE key 64) at tp 8, 4 sequences, 1,000 cached tokens, bf16
    # cache: absorbed MLA (FlashMLA) scores each of a rank's 16 heads against the 576-wide latent + RoPE key
    # and sums the 512-wide latent: 2 x 4 x 1,000 x 16 x (576 + 512) = 139,264,000 FLOPs; it reads the
    # latent cache once, 4 x 1,000 x 576 x 2 B = 4,608,000 B, and each head's query and output, 4 x 16 x 1,088
    # x 2 B = 139,264 B
    from llmsim.engine.forward import decode_attention
    from llmsim.spec.convert import model_values
    from llmsim.spec.presets import PresetRegistry

    m = model_values(PresetRegistry().get("models", "deepseek-r1"))
    op = decode_attention(m, 4, 1000, 8, "bf16", 1.0)
    assert op.flops == 139_264_000
    assert op.bytes == 4_608_000 + 139_264
