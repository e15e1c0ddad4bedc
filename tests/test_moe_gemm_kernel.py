"""parallel.moe_gemm_kernel: routed-expert GEMMs on Ampere-generation (SM80) kernels, as TensorRT-LLM before
v0.10 ran them on Hopper, at the preset's measured fraction of the device's own GEMM rate."""

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsim.engine.compute import expert_gemm_rate, layer_ops, op_time
from llmsim.spec.convert import accelerator_values, model_values
from llmsim.study import records as est

MIXTRAL = ["model=mixtral-8x7b", "system.num_devices=2", "parallel.tp=2", "parallel.pp=1", "workload.precision=fp16"]
STATIC = [*MIXTRAL, "workload.mode=inference", "workload.batch_size=1", "workload.input_len=2048",
          "workload.output_len=1"]


def _record(registry, *overrides):
    return est.record(est.load(None, registry, [*MIXTRAL, *overrides]))


def _both(registry, *overrides):
    return [_record(registry, *overrides, f"parallel.moe_gemm_kernel={k}") for k in ("native", "sm80")]


def _experts_up(registry, tokens: int, rate: float):
    m = model_values(registry.get("models", "mixtral-8x7b"))
    ops = layer_ops(m, 1, tokens, 2, 1, False, "fp16", True, 1, flash=True, expert_rate=rate)
    return next(o for o in ops if o.name == "experts_up")


def test_preset_fraction_is_the_median_measured_sm80_over_sm90_grouped_gemm_ratio(registry):
    # tgale96/grouped_gemm#37, H100, one MoE up-projection problem under three routing skews: CUTLASS SM80
    # over SM90 cooperative grouped GEMM = 116.9/160.5, 109.2/151.5, 113.2/154.3 = 0.728, 0.721, 0.734
    median = sorted(a / b for a, b in ((116.9, 160.5), (109.2, 151.5), (113.2, 154.3)))[1]
    for name in ("h100-sxm", "h100-sxm-96gb", "h200-sxm", "h800-sxm"):
        assert registry.get("accelerators", name).sm80_matmul_fraction == round(median, 2) == 0.73
    assert registry.get("accelerators", "a100-sxm-80gb").sm80_matmul_fraction == 1.0  # its own kernels
    assert registry.get("accelerators", "b200").sm80_matmul_fraction is None  # not measured


def test_a_compute_bound_expert_gemm_slows_by_the_fraction_forward_and_backward(registry):
    acc = accelerator_values(registry.get("accelerators", "h100-sxm"))
    # prefill of 2,048 tokens: 2,048 x top-2 / 8 experts x 1.1 (load imbalance) = 563 rows an expert,
    # ~480 FLOP/byte, over twice the ridge of H100's GEMMs in a step (989.4 x 0.80 x 0.75 / (3.35 x 0.85) = 210):
    # compute-bound, so the time is divided by nearly 0.73; the memory time, which the slower kernel does not
    # lengthen, keeps a share of the blend (engine/gemm_shape.py): at t_m / t_c = 0.44, (0.44)^2.6 / 2.6 = 4%
    # of the native time, 2% of the slower one, so the ratio lies within 3% below 1/0.73
    native, sm80 = (_experts_up(registry, 2048, r) for r in (1.0, 0.73))
    for backward in (False, True):
        ratio = op_time(sm80, acc, "fp16", backward=backward) / op_time(native, acc, "fp16", backward=backward)
        assert 0.97 / 0.73 < ratio < 1 / 0.73


def test_batch_one_decode_reads_two_experts_and_the_kernel_does_not_matter(registry):
    # One token, top-2 of 8 experts on tp 2: ~2 experts get 1 x 2 x 1.1 / 2 = 1.1 rows each (the 6 others no
    # tile). Per expert up GEMM: its rows padded to a 16-row tile, 2 x 16 x 14336 x 4096 / (989.4e12 x 0.605) =
    # 3.1 us of compute (x 1/0.73 = 4.3 us) against its weights, 14336 x 4096 x 2 B / (3.35e12 x 0.85) = 41.2 us:
    # memory-bound either way, the compute's share of the blend (4.3 / 41.2)^2.6 / 2.6 = 0.1%, so TPOT moves by
    # less than 0.1%; the 2,048-token prefill is compute-bound
    native, sm80 = _both(registry, "workload.mode=inference", "workload.batch_size=1", "workload.input_len=2048",
                         "workload.output_len=128", "system.accelerator=h100-sxm")
    assert sm80["tpot_s"] == pytest.approx(native["tpot_s"], rel=1e-3) and sm80["ttft_s"] > 1.1 * native["ttft_s"]


def test_large_batch_decode_prefill_serving_and_training_all_run_the_slower_kernels(registry):
    # batch 1,024 decode: 1,024 x 2 / 8 x 1.1 = 282 rows an expert, about H100's ridge: compute-bound
    native, sm80 = _both(registry, "workload.mode=inference", "workload.batch_size=1024", "workload.input_len=128",
                         "workload.output_len=128", "system.accelerator=h100-sxm")
    assert sm80["tpot_s"] > 1.05 * native["tpot_s"]
    # routed experts are ~3/4 of a 2,048-token prefill on H100: 1/0.73 on them lengthens it 20-37%
    native, sm80 = _both(registry, *STATIC[len(MIXTRAL):], "system.accelerator=h100-sxm")
    assert 1.2 < sm80["ttft_s"] / native["ttft_s"] < 1 / 0.73
    native, sm80 = _both(registry, "workload.mode=serving", "workload.concurrency=256", "workload.input_len=2048",
                         "workload.output_len=128", "system.accelerator=h200-sxm")
    assert sm80["throughput_tokens_per_s"] < 0.95 * native["throughput_tokens_per_s"]
    native, sm80 = _both(registry, "workload.mode=training", "system.num_devices=8", "parallel.ep=4",
                         "workload.global_batch_size=16", "workload.seq_len=4096", "workload.precision=bf16",
                         "system.accelerator=h100-sxm")
    assert sm80["step_time_s"] > 1.1 * native["step_time_s"]


def test_the_a100_runs_its_own_kernels(registry):
    native, sm80 = _both(registry, *STATIC[len(MIXTRAL):], "system.accelerator=a100-sxm-80gb")
    assert sm80 == native


def test_expert_gemm_rate_follows_the_key(registry):
    sc = est.load(None, registry, [*STATIC, "system.accelerator=h200-sxm", "parallel.moe_gemm_kernel=sm80"])
    assert expert_gemm_rate(sc.parallel, sc.accelerator) == 0.73
    sc = est.load(None, registry, [*STATIC, "system.accelerator=h200-sxm"])
    assert sc.parallel.moe_gemm_kernel == "native" and expert_gemm_rate(sc.parallel, sc.accelerator) == 1.0


@pytest.mark.parametrize("flags, words", [
    (["--set", "system.accelerator=b200"], ["b200", "sm80_matmul_fraction", "allowed: native"]),
    (["--precision", "fp8"], ["workload.precision fp8", "allowed with sm80: bf16, fp16"]),
])
def test_sm80_where_it_cannot_run_is_a_one_line_error(flags, words):
    r = run_cli("estimate", "--mode", "inference", "--model", "mixtral-8x7b", "--devices", "2", "--tp", "2", "--pp",
                "1", "--input-len", "128", "--output-len", "128", "--set", "parallel.moe_gemm_kernel=sm80", *flags)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "parallel.moe_gemm_kernel sm80" in r.stderr and all(w in r.stderr for w in words)


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 512), input_len=st.integers(16, 4096), output_len=st.integers(1, 512),
       acc=st.sampled_from(["h100-sxm", "h200-sxm", "a100-sxm-80gb"]))
def test_static_batches_are_never_faster_on_sm80_kernels(batch, input_len, output_len, acc):
    # (under continuous batching a slower prefill can leave smaller decode batches and a shorter TPOT;
    # its throughput falls, as the serving case above checks)
    from llmsim.spec.presets import PresetRegistry

    native, sm80 = _both(PresetRegistry(), "workload.mode=inference", f"system.accelerator={acc}",
                         f"workload.batch_size={batch}", f"workload.input_len={input_len}",
                         f"workload.output_len={output_len}")
    assert sm80["ttft_s"] >= native["ttft_s"] and sm80["tpot_s"] >= native["tpot_s"]
