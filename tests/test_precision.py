"""Precision by component (workload.precision as a mapping or ``native``): weight-only GEMMs, the experts'
own weights, the KV cache's default."""

import pytest
from conftest import assert_spec_error

from llmsim.engine import calibration as cal
from llmsim.engine.compute import WEIGHT_ONLY_RATE, layer_ops, op_time
from llmsim.engine.inference import memory_bytes
from llmsim.engine.split import resolve_split
from llmsim.study import records as est

GPT_OSS = ["model=gpt-oss-120b", "system.num_devices=1", "parallel.tp=1", "parallel.pp=1", "workload.mode=inference",
           "workload.batch_size=1", "workload.input_len=1024", "workload.output_len=1024"]


def _load(registry, *extra):
    return est.load(None, registry, [*GPT_OSS, *extra])


@pytest.mark.parametrize("acc", [("h100-sxm", "dgx-h100"), ("h200-sxm", "dgx-h200")])
def test_gpt_oss_runs_as_released_on_hopper_weight_only(registry, acc):
    # Hopper has no FP4 tensor cores: "fp4" is refused there, the released MXFP4 experts run weight-only
    # beside BF16 attention (the preset's precision, workload.precision: native)
    sc = _load(registry, f"system.accelerator={acc[0]}", f"system.network={acc[1]}", "workload.precision=native")
    w = sc.workload
    assert (w.precision, w.weights, w.experts, w.kv_cache) == ("bf16", "bf16", "mxfp4", "bf16")
    row = est.record(sc)
    assert row["precision"] == "bf16, experts mxfp4" and row["kv_precision"] == "bf16" and row["tpot_s"] > 0
    # weights, by hand from config.json: per layer 128 experts x (3 x 2,880 x 2,880 + 3 x 2,880 biases)
    # = 128 x 24,891,840, x 36 layers = 114,701,598,720 expert parameters at 0.53125 B (MXFP4: 4 bits and an
    # 8-bit scale per 32); the rest: 36 x (attention 26,550,080 + router 368,640 + norms 11,520) + embeddings
    # 2 x 201,088 x 2,880 = 2,127,755,520 at 2 B: 4,255,511,040 + 60,935,224,320 = 65,190,735,360 B
    mem = memory_bytes(sc, resolve_split(sc).as_column(), 1, 1024, 1024)
    assert float(mem["weights"][0]) == pytest.approx(65_190_735_360, rel=1e-12)
    with pytest.raises(Exception, match="fp4 is not supported by accelerator"):
        _load(registry, f"system.accelerator={acc[0]}", f"system.network={acc[1]}", "workload.precision=fp4")


def test_weight_only_gemm_reads_narrow_weights_and_computes_at_the_16_bit_rate(registry):
    sc = _load(registry, "system.accelerator=h100-sxm", "system.network=dgx-h100")
    m, acc = sc.model, sc.accelerator

    def mlp_up(tokens, **kw):
        ops = layer_ops(m, 1, tokens, 1, 1, False, "bf16", False, **kw)
        return next(o for o in ops if o.name == "mlp_up")

    # one token (memory-bound): the GEMM reads 2,880 x 5,760 weights at 0.5625 B instead of 2 B, plus the
    # 2,880 + 5,760 activations at 2 B: (17,280 + 9,331,200) / (17,280 + 33,177,600) = 0.2817
    one_w4, one = mlp_up(1, weights="fp4"), mlp_up(1)
    assert one_w4.bytes / one.bytes == pytest.approx((17_280 + 9_331_200) / (17_280 + 33_177_600), rel=1e-12)
    # Marlin measures 3.87x of an ideal 3.87x at batch 1 (arXiv 2408.11743, fig. 9); MXFP4's 4.5 bits make the
    # ideal here 33,194,880 / 9,348,480 = 3.551x. By hand (engine/gemm_shape.py, p = 2.6; rate = 794.5 TFLOP/s
    # MAMF x KERNEL_EFFICIENCY 0.7530 = 598.3 TFLOP/s; HBM 3.35 TB/s x 0.85 = 2.8475 TB/s): one row padded to a
    # 16-row tile, 16-bit: 2 x 16 x 2,880 x 5,760 / 598.2e12 = 0.887 us of compute, 33,194,880 B / 2.8475e12 =
    #   11.658 us of memory: (0.887^2.6 + 11.658^2.6)^(1/2.6) = 11.664 us;
    # 4-bit (0.9 of the rate): 0.887 / 0.9 = 0.986 us, 9,348,480 B / 2.8475e12 = 3.283 us: 3.338 us; 3.49x
    k = cal.KERNEL_EFFICIENCY / 0.7530  # the compute times above scale with the fitted constant

    def blend(c, m):
        return (c**2.6 + m**2.6) ** (1 / 2.6)

    ratio = op_time(one, acc, "bf16") / op_time(one_w4, acc, "bf16")
    assert ratio == pytest.approx(blend(0.887 / k, 11.658) / blend(0.986 / k, 3.283), rel=2e-3)
    assert 3.3 < ratio < 3.551  # the 4-bit GEMV's tile computes in a third of its memory time
    # 16,384 tokens (compute-bound): the dequantising kernel runs at WEIGHT_ONLY_RATE (0.9) of the 16-bit one
    big_w4, big = mlp_up(16384, weights="fp4"), mlp_up(16384)
    # (the memory time, a tenth of the compute time, moves the blended ratio by 0.1%)
    assert op_time(big_w4, acc, "bf16") / op_time(big, acc, "bf16") == pytest.approx(1 / WEIGHT_ONLY_RATE, rel=2e-3)


def test_an_fp4_or_fp8_model_keeps_a_16_bit_kv_cache_unless_told(registry):
    # vLLM and SGLang kv_cache_dtype auto: the model's 16-bit dtype, whatever the weights
    sc = _load(registry, "system.accelerator=b200", "system.network=dgx-b200", "workload.precision=fp4")
    assert sc.workload.kv_cache == "bf16"
    told = _load(registry, "system.accelerator=b200", "system.network=dgx-b200", "workload.precision=fp4",
                 "workload.kv_precision=fp8")
    assert told.workload.kv_cache == "fp8"
    mapped = _load(registry, "system.accelerator=b200", "system.network=dgx-b200",
                   "workload.precision={activations: fp8, kv_cache: fp8}")
    assert (mapped.workload.weights, mapped.workload.kv_cache) == ("fp8", "fp8")


@pytest.mark.parametrize(("text", "key"), [
    (("workload: {mode: inference, precision: {activations: fp8, weights: bf16}, batch_size: 1, input_len: 8, "
      "output_len: 8}"), "wider than activations"),
    ("workload: {mode: training, precision: {activations: bf16, weights: fp8}, global_batch_size: 8}",
     "training takes one precision"),
    ("workload: {mode: inference, precision: native, batch_size: 1, input_len: 8, output_len: 8}",
     "has no published precision"),
    # a dense model has no experts to store narrower; a misspelt key of the mapping is named, not a list of names
    (("workload: {mode: inference, precision: {activations: bf16, experts: fp8}, batch_size: 1, input_len: 8, "
      "output_len: 8}"), "workload.precision.experts: model 'llama3-8b' has no experts"),
    (("workload: {mode: inference, precision: {activations: bf16, wights: fp8}, batch_size: 1, input_len: 8, "
      "output_len: 8}"), "workload.precision.wights: unknown key 'wights'; allowed keys: activations, weights"),
])
def test_precision_mappings_that_no_engine_runs_are_refused(tmp_path, text, key):
    assert_spec_error(tmp_path, "model: llama3-8b\nsystem: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}\n"
                      "parallel: {tp: 8, pp: 1}\n" + text + "\n", key)


def test_one_component_set_over_a_precision_name_keeps_the_name_for_the_rest(registry):
    # workload.precision: bf16, then --set workload.precision.experts=mxfp4 (or a sweep's grid key
    # workload.precision.experts): bf16 throughout but the experts, as {activations: bf16, experts: mxfp4}
    sc = _load(registry, "system.accelerator=h100-sxm", "system.network=dgx-h100", "workload.precision=bf16",
               "workload.precision.experts=mxfp4")
    w = sc.workload
    assert (w.precision, w.weights, w.experts, w.kv_cache) == ("bf16", "bf16", "mxfp4", "bf16")
    with pytest.raises(Exception, match="'workload.precision' is 'native', not a mapping"):
        _load(registry, "system.accelerator=h100-sxm", "system.network=dgx-h100", "workload.precision=native",
              "workload.precision.experts=mxfp4")


def test_a_sweep_over_the_experts_precision_runs(tmp_path, registry):
    # a grid key under a precision name: each point is that name with its experts' precision (was: every
    # point infeasible, "not a mapping", and an empty file with exit 0). gpt-oss-120b on one H100 (80 GB):
    # MXFP4 experts, 65.2 GB of weights, fit; FP8 experts, 114.7e9 x 1 B alone, do not
    from llmsim.spec.sweep import load_sweep
    from llmsim.study.sweep import run

    path = tmp_path / "s.yaml"
    path.write_text("base:\n  model: gpt-oss-120b\n  system: {accelerator: h100-sxm, num_devices: 1, network: dgx-h100}\n"
                    "  parallel: {tp: 1, pp: 1}\n  workload: {mode: inference, precision: bf16, batch_size: 1, "
                    "input_len: 1024, output_len: 1024}\ngrid:\n  workload.precision.experts: [mxfp4, fp8]\nkeep: all\n")
    rows = run(load_sweep(path), ())
    assert rows["precision"].tolist() == ["bf16, experts mxfp4", "bf16, experts fp8"]
    assert rows["infeasible_reason"].tolist()[0] is None or rows["infeasible_reason"].isna().tolist()[0]
    assert rows["infeasible_reason"].tolist()[1] == "does not fit in memory"
