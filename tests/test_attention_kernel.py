"""Fused-attention throughput: measured kernel rates, the short-sequence roll-off, and the fallback."""

import pytest

from llmsim.engine import calibration as cal
from llmsim.engine.compute import Op, attention_rates, op_time
from llmsim.study.records import load
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def h100(registry):
    return load(None, registry, ["system.accelerator=h100-sxm"]).accelerator


def _attention(flops: float, seq: float) -> Op:
    return Op("attention", "attention", flops, 0.0, seq, cal.FLASH_BWD_FLOPS_RATIO, 1.0, True)


def test_measured_fa2_rates_on_h100(h100):
    op = _attention(1e12, 2048)
    # forward: 335 TF (FA2, FA3 paper fig. 5) x k (KERNEL_EFFICIENCY, fitted: 0.7414 -> 248.4 TF) x 2048 /
    # (2048 + 280) = 218.6 TF
    k = cal.KERNEL_EFFICIENCY
    assert op_time(op, h100, "bf16", kernel="fa2") == pytest.approx(1e12 / (335e12 * k * 2048 / 2328))
    # backward: 322 TF x k x 0.8797 (210.1 TF at k = 0.7414)
    assert op_time(op, h100, "bf16", backward=True, kernel="fa2") == pytest.approx(
        1e12 / (322e12 * k * 2048 / 2328))


def test_auto_picks_the_fastest_measured_kernel(h100):
    # fa3: 1/616 + 2.5/561 = 0.00608 per TF beats cudnn (0.00670) and fa2 (0.00975)
    assert attention_rates(h100, "auto") == (616e12, 561e12)


def test_short_sequences_run_slower(h100):
    long, short = _attention(1e12, 16384), _attention(1e12, 512)
    # 16384/16664 = 0.983 against 512/792 = 0.646 of the long-sequence rate: 1.52x slower per FLOP
    ratio = op_time(short, h100, "bf16", kernel="fa2") / op_time(long, h100, "bf16", kernel="fa2")
    assert ratio == pytest.approx((16384 / 16664) / (512 / 792))


def test_fallback_without_measurement_uses_the_matmul_efficiency(registry):
    a100 = load(None, registry, ["system.accelerator=a100-sxm-80gb"]).accelerator
    assert attention_rates(a100, "fa2") is None
    # 312 TF peak x 271.2/312 (MAMF) x k (KERNEL_EFFICIENCY) x 0.75 (ATTENTION_MATMUL_RATIO): 150.8 TF at
    # long sequences with the fitted k = 0.7414
    op = _attention(1e12, 2048)
    k = cal.KERNEL_EFFICIENCY
    assert op_time(op, a100, "bf16") == pytest.approx(1e12 / (271.2e12 * k * 0.75 * 2048 / 2328))


def test_unknown_kernel_is_a_one_line_error():
    r = run_cli("estimate", "--set", "system.accelerator=h100-sxm", "--set", "parallel.attention_kernel=fa9")
    assert r.returncode == 2
    assert "attention_kernel 'fa9'" in r.stderr and "allowed: auto, fa2, cudnn, fa3" in r.stderr
    assert "Traceback" not in r.stderr
