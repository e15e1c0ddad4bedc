"""Stragglers and goodput (engine/reliability.py), worked by hand."""

import pytest

from llmsim.engine.reliability import expected_max_normal, goodput, straggler_time
from llmsim.engine.types import Reliability


def test_expected_maximum_of_normals_matches_the_tables():
    # E[max of n standard normals] (Harter 1961 tables): n = 2: 0.5642, 8: 1.4236, 100: 2.5076, 1000: 3.2414;
    # Blom's approximation is within 1% of each from n = 8 on (0.589 at n = 2, 4.4% high)
    for n, exact in ((8, 1.4236), (100, 2.5076), (1000, 3.2414)):
        assert expected_max_normal(n) == pytest.approx(exact, rel=0.01)
    assert expected_max_normal(2) == pytest.approx(0.5642, rel=0.05)
    assert expected_max_normal(1) == 0.0


def test_straggler_wait_is_the_spread_times_the_expected_maximum():
    # 10 s of compute on 1,000 devices with a 1% speed spread waits 10 x 0.01 x 3.24 = 0.324 s
    r = Reliability(device_speed_cv=0.01)
    assert straggler_time(10.0, 1000, r) == pytest.approx(10 * 0.01 * expected_max_normal(1000))
    assert straggler_time(10.0, 1000, r) == pytest.approx(0.324, rel=0.01)


def test_llama3_405b_goodput_by_young_s_interval():
    # Llama 3 405B: 16,384 GPUs at 1.97e-5 failures per GPU-hour fail every 3,600 / 0.3228 = 11,153 s; its
    # 405e9 x 14 B of weights and Adam states over 16,384 GPUs is 346 MB each, 2.84 s at 122 MB/s; Young's
    # interval sqrt(2 x 2.84 x 11,153) = 251.6 s; useful 251.6 / 254.4 x (1 - (600 + 127.2) / 11,153) = 0.9245
    # (Llama 3 reports more than 90% effective training time, Dubey et al. 2024, sec. 3.3.4)
    r = Reliability(device_speed_cv=0.01, failures_per_device_hour=1.97e-5,
                    checkpoint_write_bytes_per_s_per_device=1.22e8, restart_s=600.0)
    out = goodput(16384, 405e9 * 14 / 16384, r)
    assert float(out["checkpoint_time_s"]) == pytest.approx(2.837, rel=1e-3)
    assert float(out["checkpoint_interval_s"]) == pytest.approx(251.6, rel=2e-3)
    assert float(out["goodput_fraction"]) == pytest.approx(0.9245, abs=5e-4)


def test_no_failures_no_loss():
    out = goodput(1024, 1e9, Reliability(failures_per_device_hour=0.0))
    assert float(out["goodput_fraction"]) == 1.0
