"""Derived accelerators: node, memory and link scaling rules worked by hand."""

import pytest
from conftest import run_cli

from llmsim.spec.cost import accelerator_cost, technology
from llmsim.spec.derive import compute_scale, derive_accelerator, node_ratios
from llmsim.spec.hardware import AcceleratorSpec


def test_node_ratios_chain_the_foundry_steps_by_hand():
    # TSMC's published step gains (speed at iso-power, energy per op at iso-speed), multiplied by hand:
    # V100's N16 (25.9 MTr/mm2) -> N3E (127) over N7 (+35%, 0.35x), N5 (+15%, 0.70x), N3E (+18%, 0.66x):
    #   density 127 / 25.9 = 4.903475, speed 1.35 x 1.15 x 1.18 = 1.831950, energy 0.35 x 0.70 x 0.66 = 0.161700
    logic = technology("logic")
    assert node_ratios(logic, "n16", "n3") == pytest.approx((4.903475, 1.831950, 0.161700), rel=1e-6)
    # back from N3E to N16: the reciprocals, 0.203937, 0.545866, 6.184292
    assert node_ratios(logic, "n3", "n16") == pytest.approx((0.203937, 0.545866, 6.184292), rel=1e-6)
    # A16 and A14 are both one step from N2 (A16: 161 MTr/mm2, +8%, 0.85x; A14: 175, +10%, 0.75x), so
    # A16 -> A14 goes through N2: density 175 / 161 = 1.086957, speed 1.10 / 1.08 = 1.018519,
    # energy 0.75 / 0.85 = 0.882353
    assert node_ratios(logic, "a16", "a14") == pytest.approx((1.086957, 1.018519, 0.882353), rel=1e-6)


def test_compute_scale_at_a_power_budget():
    d, s, e = 98 / 66, 1.15, 0.70  # density x energy = 1.039: at the same power the clock must drop 3.8%
    assert compute_scale(d, s, e) == pytest.approx(d / (d * e))  # = 1 / 0.70 = 1.429
    # with 1.75x the power (400 -> 700 W) the clock takes the full 15%: 1.485 x 1.15 = 1.708
    assert compute_scale(d, s, e, 1.75) == pytest.approx(d * 1.15)


def test_derived_a100_on_n5_with_hbm3_and_nvlink4(registry):
    spec = {"base": "a100-sxm-80gb", "node": "n5", "memory": "HBM3", "stacks": 5, "scaleup": "nvlink4",
            "tdp_w": 700}
    acc = AcceleratorSpec.model_validate(derive_accelerator(spec, registry, "accelerator"))
    assert acc.peak_tflops.bf16 == pytest.approx(312 * 98 / 66 * 1.15)  # 532.8 TF
    # 5 x 819 GB/s x (2.039 TB/s / (5 x 460 GB/s)) = 3.630 TB/s: the base's 88.7% of rated bandwidth kept
    assert acc.hbm_bandwidth_tb_per_s == pytest.approx(5 * 0.819 * 2.039 / 2.3)
    assert acc.hbm_capacity_gb == 80 and acc.scaleup_bw_gb_per_s_per_dir == 450
    base = registry.get("accelerators", "a100-sxm-80gb")
    ratio = accelerator_cost(acc)["device_cost_usd"] / accelerator_cost(base)["device_cost_usd"]
    assert acc.list_price_usd == pytest.approx(base.list_price_usd * ratio)


def test_identity_derivation_keeps_the_base(registry):
    acc = AcceleratorSpec.model_validate(derive_accelerator({"base": "h100-sxm"}, registry, "accelerator"))
    base = registry.get("accelerators", "h100-sxm")
    assert acc.peak_tflops.bf16 == pytest.approx(base.peak_tflops.bf16)
    assert acc.hbm_bandwidth_tb_per_s == pytest.approx(base.hbm_bandwidth_tb_per_s)


def test_bad_derivation_is_a_one_line_error(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("model: llama3-8b\nsystem:\n  accelerator: {base: h100-sxm, memory: HBM9}\n"
                    "  num_devices: 8\n  network: dgx-h100\nworkload: {global_batch_size: 8}\n")
    r = run_cli("estimate", str(path), "--pp", "1")
    assert r.returncode == 2 and "unknown HBM generation 'HBM9'" in r.stderr and f"{path}:3" in r.stderr


def test_unsupported_precision_is_an_error_not_a_nan():
    r = run_cli("estimate", "--accelerator", "a100-sxm-80gb", "--network", "dgx-a100", "--precision", "fp8")
    assert r.returncode == 2
    assert "precision fp8 is not supported by accelerator 'a100-sxm-80gb'; allowed: fp32, tf32, bf16, fp16" in r.stderr
