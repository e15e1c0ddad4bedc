"""parallel.moe_gemm_kernel: routed-expert GEMMs on Ampere-generation (SM80) kernels, as TensorRT-LLM before
v0.10 ran them on Hopper, at the preset's measured fraction of the device's own GEMM rate."""

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsim.engine.compute import expert_gemm_rate, layer_ops, op_time
from llmsim.spec.convert import accelerator_values, model_values
from llmsim.study import records as est

MIXTRAL = ["model=mixtral-8x7b", "system.num_devices=2", "parallel.tp=2", "parallel.pp=1",
           "workload.mode=inference", "workload.precision=fp16", "workload.batch_size=1", "workload.input_len=2048",
           "workload.output_len=1"]


def _experts_up(registry, tokens: int, rate: float):
    m = model_values(registry.get("models", "mixtral-8x7b"))
    ops = layer_ops(m, 1, tokens, 2, 1, False, "fp16", True, 1, flash=True, expert_rate=rate)
    return next(o for o in ops if o.name == "experts_up")


def test_preset_fraction_is_the_measured_sm80_over_sm90_grouped_gemm_ratio(registry):
    # tgale96/grouped_gemm#37, H100, one MoE up-projection problem: CUTLASS SM80 over SM90 cooperative
    # grouped GEMM = 116.9/160.5 = 0.728, 109.2/151.5 = 0.721, 113.2/154.3 = 0.734; median 0.728 -> 0.73
    assert sorted(round(a / b, 3) for a, b in ((116.9, 160.5), (109.2, 151.5), (113.2, 154.3)))[1] == 0.728
    for name in ("h100-sxm", "h100-sxm-96gb", "h200-sxm", "h800-sxm"):
        assert registry.get("accelerators", name).sm80_matmul_fraction == 0.73
    assert registry.get("accelerators", "a100-sxm-80gb").sm80_matmul_fraction == 1.0  # its own kernels
    assert registry.get("accelerators", "b200").sm80_matmul_fraction is None  # not measured


def test_compute_bound_expert_gemm_slows_by_the_fraction_memory_bound_one_does_not(registry):
    acc = accelerator_values(registry.get("accelerators", "h100-sxm"))
    # prefill of 2,048 tokens: 2,048 x top-2 / 8 experts = 512 rows an expert, ~480 FLOP/byte > the ridge
    # (295): compute-bound, so its time is divided by 0.73 (x 1.370)
    native, sm80 = (op_time(_experts_up(registry, 2048, r), acc, "fp16") for r in (1.0, 0.73))
    assert sm80 / native == pytest.approx(1 / 0.73, rel=1e-12)
    # one decode token: ~1 FLOP/byte, the weights' read sets the time whichever kernel runs
    native, sm80 = (op_time(_experts_up(registry, 1, r), acc, "fp16") for r in (1.0, 0.73))
    assert sm80 == native


def test_sm80_kernels_slow_the_hopper_prefill_and_leave_the_a100_as_it_was(registry):
    from llmsim.engine.inference import estimate_inference

    def run(acc, kernel):
        return estimate_inference(est.load(None, registry, [*MIXTRAL, f"system.accelerator={acc}",
                                                            f"parallel.moe_gemm_kernel={kernel}"]))["ttft_s"]

    # routed experts are ~3/4 of this prefill on H100: 1/0.73 on them lengthens the TTFT by 20-40%
    h100 = run("h100-sxm", "sm80") / run("h100-sxm", "native")
    assert 1.2 < h100 < 1 / 0.73
    assert run("a100-sxm-80gb", "sm80") == run("a100-sxm-80gb", "native")


def test_expert_gemm_rate_follows_the_key(registry):
    sc = est.load(None, registry, [*MIXTRAL, "system.accelerator=h200-sxm", "parallel.moe_gemm_kernel=sm80"])
    assert expert_gemm_rate(sc.parallel, sc.accelerator) == 0.73
    sc = est.load(None, registry, [*MIXTRAL, "system.accelerator=h200-sxm"])
    assert sc.parallel.moe_gemm_kernel == "native" and expert_gemm_rate(sc.parallel, sc.accelerator) == 1.0


def test_sm80_on_an_unmeasured_accelerator_is_a_one_line_error():
    r = run_cli("estimate", "--mode", "inference", "--set", "model=mixtral-8x7b", "--set", "system.accelerator=b200",
                "--set", "parallel.moe_gemm_kernel=sm80", "--set", "workload.input_len=128", "--set",
                "workload.output_len=128")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "parallel.moe_gemm_kernel sm80" in r.stderr and "b200" in r.stderr and "allowed: native" in r.stderr


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 512), input_len=st.integers(16, 4096), output_len=st.integers(1, 512),
       acc=st.sampled_from(["h100-sxm", "h200-sxm", "a100-sxm-80gb"]))
def test_sm80_kernels_are_never_faster_than_native_ones(batch, input_len, output_len, acc):
    from llmsim.engine.inference import estimate_inference
    from llmsim.spec.presets import PresetRegistry

    registry = PresetRegistry()
    base = [*MIXTRAL, f"system.accelerator={acc}", f"workload.batch_size={batch}",
            f"workload.input_len={input_len}", f"workload.output_len={output_len}"]
    native, sm80 = (estimate_inference(est.load(None, registry, [*base, f"parallel.moe_gemm_kernel={k}"]))
                    for k in ("native", "sm80"))
    assert sm80["ttft_s"] >= native["ttft_s"] and sm80["tpot_s"] >= native["tpot_s"]
