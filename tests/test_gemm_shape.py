"""GEMM time by shape (engine/gemm_shape.py): tile padding, the compute/memory blend, the fixed cost, and the
derivation of the constants from the committed H200 measurements."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsim.engine import calibration as cal
from llmsim.engine import gemm_shape
from llmsim.engine.compute import gemm, kernel_time, op_time
from llmsim.spec.convert import accelerator_values
from llmsim.spec.presets import PresetRegistry

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def h100():
    return accelerator_values(PresetRegistry().get("accelerators", "h100-sxm"))


def test_tile_factor_pads_rows_to_16_and_columns_to_128():
    # 3 rows in one 16-row tile: 16/3; 200 columns in two 128-column tiles: 256/200
    assert gemm_shape.tile_factor(3, 200) == pytest.approx(16 / 3 * 256 / 200, rel=1e-12)
    # rows past one tile: their last tile half full on average, 4096 + 8 rows; 1536 columns are 12 whole tiles
    assert gemm_shape.tile_factor(4096, 1536) == pytest.approx(4104 / 4096, rel=1e-12)
    assert gemm_shape.tile_factor(0, 128) == 1.0  # an empty output is not padded
    # arrays pad element by element: 8 rows take a whole tile (16/8), 40 rows 40 + 8 (48/40)
    assert gemm_shape.tile_factor(np.array([8.0, 40.0]), 128) == pytest.approx([2.0, 48 / 40], rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(m=st.floats(1e-3, 1e6), grow=st.floats(1.0, 4.0))
def test_padded_rows_grow_with_the_rows(m, grow):
    # what sweeps and the serving loop need: more rows never compute fewer padded rows, and never fewer than
    # they have (no jump either: max(16, m + 8) is continuous)
    padded = m * gemm_shape.tile_factor(m, 128)
    assert padded >= m and m * grow * gemm_shape.tile_factor(m * grow, 128) >= padded * (1 - 1e-12)


def test_small_gemm_by_hand(h100):
    # Qwen3-30B-A3B's expert up-projection for 40 rows: M 40, N 1536, K 2048, bf16 on an H100.
    # rate = 794.5 TFLOP/s (MAMF) x KERNEL_EFFICIENCY 0.7530 = 598.3 TFLOP/s; 40 rows compute as 40 + 16/2 = 48:
    #   compute 2 x 48 x 1536 x 2048 = 302.0 MFLOP / 598.2e12 = 0.5048 us;
    #   memory (40 x 2048 + 40 x 1536) x 2 B + 1536 x 2048 x 2 B = 6,578,176 B / (3.35e12 x 0.85) = 2.3101 us;
    #   blended (0.5048^2.6 + 2.3101^2.6)^(1/2.6) = 2.3101 x (1 + 0.2185^2.6)^(1/2.6) = 2.3101 x 1.00720 = 2.3267 us
    op = gemm("experts_up", 40, 1536, 2048, 2.0)
    k = cal.KERNEL_EFFICIENCY / 0.7530  # the compute time above scales with the fitted constant
    t_c, t_m = 0.5048e-6 / k, 2.3101e-6
    expected = (t_c**2.6 + t_m**2.6) ** (1 / 2.6)
    assert expected == pytest.approx(2.3267e-6, rel=1e-3) or k != 1.0
    assert op_time(op, h100, "bf16") == pytest.approx(expected, rel=1e-3)
    # one forward kernel: the training step's per-kernel cost and the GEMM's fixed 4.0 us on top
    assert kernel_time(op, h100, "bf16") == pytest.approx(expected + cal.KERNEL_OVERHEAD_S + 4.0e-6, rel=1e-3)


def test_every_gemm_carries_its_output_shape(registry):
    # every GEMM the engine builds is padded by its own output shape: none may lose rows or columns on the way
    # (a rebuilt Op that dropped them would silently run unpadded); dense, MoE with per-expert kernels and the
    # einsum dispatch, MLA, unfused attention and weight-only experts
    from llmsim.engine.compute import engine_ops, head_ops, layer_ops
    from llmsim.study import records as est

    cases = {"llama3-8b": {}, "mixtral-8x7b": {"moe_dispatch": "einsum", "gemm_per_expert": True},
             "deepseek-v3": {"experts": "fp4"}, "gpt-oss-120b": {}}
    for name, kw in cases.items():
        m = est.load(None, registry, [f"model={name}"]).model
        for flash in (True, False):
            ops = layer_ops(m, 2, 1024, 2, 1, True, "bf16", m.moe is not None, ep=2, flash=flash, **kw)
            ops += engine_ops(ops, "fp8") + head_ops(m, 2, 1024, 2, 1, "bf16")
            gemms = [o for o in ops if o.kind == "gemm"]
            assert gemms and all(np.all(o.rows > 0) and np.all(o.cols > 0) for o in gemms), name


def test_each_per_expert_kernel_pays_the_fixed_time(h100):
    # Transformer Engine's GroupedLinear launches one GEMM per local expert: 16 kernels pay 16 x (4.0 us +
    # KERNEL_OVERHEAD_S) forward and twice that backward (input and weight gradients); the FLOPs and bytes are
    # the same as one fused kernel's
    from llmsim.engine.compute import _scale

    one = gemm("experts_up", 64, 1536, 2048, 2.0)
    fused, looped = _scale(one, 16, 1.0, 1.0), _scale(one, 16, 16.0, 1.0)
    per_kernel = 4.0e-6 + cal.KERNEL_OVERHEAD_S
    assert kernel_time(looped, h100, "bf16") - kernel_time(fused, h100, "bf16") == pytest.approx(15 * per_kernel)
    assert (kernel_time(looped, h100, "bf16", backward=True) - kernel_time(fused, h100, "bf16", backward=True)
            == pytest.approx(2 * 15 * per_kernel))


def test_large_gemm_keeps_the_calibrated_rate(h100):
    # 8192^3 in bf16: 8 rows of padding (0.1%), memory 3 x 8192^2 x 2 B = 403 MB against 1.1 TFLOP, so the
    # blended time is the compute time at MAMF x KERNEL_EFFICIENCY within 0.1% + (t_m / t_c)^2.6 / 2.6 < 0.2%:
    # the rule it replaced gave the same rate times 8192 / (8192 + 64) = 0.992
    op = gemm("mlp_up", 8192, 8192, 8192, 2.0)
    t_c = 2 * 8192**3 / (794.5e12 * cal.KERNEL_EFFICIENCY)
    assert op_time(op, h100, "bf16") == pytest.approx(t_c, rel=2e-3)


@settings(max_examples=60, deadline=None)
@given(m=st.floats(1, 1e5), n=st.floats(16, 6e4), k=st.floats(16, 6e4), grow=st.floats(1.0, 8.0))
def test_more_rows_never_take_less_time_and_no_roof_is_beaten(h100, m, n, k, grow):
    small, big = gemm("g", m, n, k, 2.0), gemm("g", m * grow, n, k, 2.0)
    assert op_time(big, h100, "bf16") >= op_time(small, h100, "bf16") * (1 - 1e-12)
    t = op_time(small, h100, "bf16")
    assert t >= small.flops / (794.5e12 * cal.KERNEL_EFFICIENCY) * (1 - 1e-12)  # the compute roof, unpadded
    assert t >= small.bytes / (3.35e12 * 0.85) * (1 - 1e-12)  # the memory roof


def test_the_derivation_script_reproduces_the_constants():
    spec = importlib.util.spec_from_file_location("fit_gemm_shape", ROOT / "benchmarks" / "kernels" / "fit_gemm_shape.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    derived = fit.constants(ROOT / "benchmarks" / "kernels" / "h200" / "steady_gemm.csv")
    assert derived == {"GEMM_FIXED_S": cal.GEMM_FIXED_S, "GEMM_BLEND_POWER": cal.GEMM_BLEND_POWER,
                       "WGRAD_TILE_DEPTH": cal.WGRAD_TILE_DEPTH}
    assert (fit.TILE_ROWS, fit.TILE_COLS) == (cal.GEMM_TILE_ROWS, cal.GEMM_TILE_COLS)


def test_the_per_operator_check_runs_on_the_committed_measurements():
    # benchmarks/kernels/compare_ops.py: the largest device copy on the H200 (65,536 x 7,168 bf16) read and wrote
    # 1,879,048,192 B in 444.1 us (memory.csv: 4,231 GB/s) against llmsim's 4.8 TB/s x 0.85 = 4.08 TB/s: 1.037
    spec = importlib.util.spec_from_file_location("compare_ops", ROOT / "benchmarks" / "kernels" / "compare_ops.py")
    cmp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cmp)
    rows = cmp.rows()
    assert rows[0][3] == pytest.approx(4231.0e9 / 4.08e12, rel=1e-3)
    assert len(rows) == 10 and all(np.isfinite(r[3]) and r[3] > 0 for r in rows)


def test_backward_runs_the_input_and_weight_gradients_by_hand(h100):
    # M 1024, N 4096, K 4096 in bf16 on an H100; rate 794.5 TFLOP/s x 0.7530 = 598.3 TFLOP/s, HBM 2.8475 TB/s.
    # Unpadded compute 2 x 1024 x 4096 x 4096 = 34.36 GFLOP / 598.2e12 = 57.44 us; memory (1024 x 4096 x 2 x 2
    # + 4096 x 4096 x 2) B = 50.33 MB / 2.8475e12 = 17.68 us for each GEMM.
    # Input gradient, tiles 1024 x 4096: rows (1024 + 8) / 1024 -> 57.89 us, blended with 17.68 us: 58.89 us.
    # Weight gradient, tiles 4096 x 4096: (4096 + 8) / 4096 -> 57.55 us, blended: 58.57 us (a dense GEMM: no
    # reduction-depth cost). Backward 117.46 us, plus two kernels of (1.0 + 4.0) us.
    from llmsim.engine.compute import _scale

    op = gemm("mlp_up", 1024, 4096, 4096, 2.0)
    k = cal.KERNEL_EFFICIENCY / 0.7530

    def blend(c, m):
        return (c**2.6 + m**2.6) ** (1 / 2.6)

    expected = blend(57.89e-6 / k, 17.68e-6) + blend(57.55e-6 / k, 17.68e-6)
    assert expected == pytest.approx(117.46e-6, rel=1e-3) or k != 1.0
    assert kernel_time(op, h100, "bf16", backward=True) == pytest.approx(
        expected + 2 * (cal.KERNEL_OVERHEAD_S + 4.0e-6), rel=1e-3)
    # one expert of a grouped GEMM with 64 rows: forward 2 x 72 x 4096^2 / 598.2e12 = 4.04 us of compute against
    # 34.6 MB / 2.8475e12 = 12.15 us of memory, 12.3 us blended, + 5 us: 17.3 us. Backward: the input gradient
    # the same 12.3 us; the weight gradient reduces over 64 rows, 3.59 us x 1.002 x (1 + 230/64) = 16.53 us
    # against 12.15 us: 19.06 us; + 10 us: 41.4 us, 2.39x the forward, where twice the forward's work gave 2.0x
    few = _scale(gemm("experts_up", 64, 4096, 4096, 2.0), 1, 1.0, 1.0)
    ratio = kernel_time(few, h100, "bf16", backward=True) / kernel_time(few, h100, "bf16")
    assert ratio == pytest.approx(2.39, abs=0.03)
