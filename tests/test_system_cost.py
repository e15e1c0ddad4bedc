"""System capex, power, $/hour and $ per million tokens, worked by hand."""

import pytest
from conftest import run_cli

from llmsim.engine.cost.system import fat_tree_levels, scale_out_per_device, system_cost
from llmsim.engine.types import CostRates, Network, Tier

RATES = CostRates(host_usd_per_device=4000, host_power_w_per_device=575, switch_port_usd=562.5, link_usd=1280,
                  switch_radix=64, pue=1.5, electricity_usd_per_kwh=0.10, amortization_years=5)
NET = Network("n", (Tier("nvlink", 8, "switch", 450e9, 1e-6),
                    Tier("ib", 4096, "fat-tree", 50e9, 5e-6, oversubscription=2.0)))


def test_fat_tree_levels_follow_the_radix():
    # radix 64: one switch holds 64 endpoints, two levels 64^2/2 = 2,048, three beyond
    assert [fat_tree_levels(n, 64) for n in (64, 65, 2048, 2049)] == [1, 2, 2, 3]


def test_scale_out_ports_and_links_per_device():
    assert scale_out_per_device(NET, 8, 64) == (0.0, 0.0)  # inside one NVLink domain: no scale-out
    # 1,024 devices: 2 levels, 2:1 oversubscribed -> 1 + 2 * 1/2 = 2 ports and 1 + 1/2 = 1.5 links each
    assert scale_out_per_device(NET, 1024, 64) == (2.0, 1.5)


def test_system_cost_by_hand():
    out = system_cost(1024, 25000.0, 700.0, NET, RATES, tokens_per_s=1e6)
    network = 1024 * (2 * 562.5 + 1.5 * 1280)  # 3,118,080 USD
    capex = 1024 * (25000 + 4000) + network  # 32,814,080 USD
    power = 1024 * (700 + 575) * 1.5  # 1,958,400 W
    per_hour = capex / (5 * 8766) + power / 1e3 * 0.10  # 748.67 + 195.84 = 944.51 USD/h
    assert out["network_capex_usd"] == pytest.approx(network)
    assert out["system_capex_usd"] == pytest.approx(capex)
    assert out["system_power_w"] == pytest.approx(power)
    assert out["cost_per_hour_usd"] == pytest.approx(per_hour)
    # 1e6 tokens/s = 3.6e9 tokens/h -> 944.51 / 3,600 = 0.262 USD per million tokens; 1.96 J per token
    assert out["cost_per_million_tokens_usd"] == pytest.approx(per_hour / 3600)
    assert out["energy_per_token_j"] == pytest.approx(1.9584)


def test_cloud_price_replaces_ownership():
    rented = CostRates(**{**RATES.__dict__, "cloud_usd_per_device_hour": 2.5})
    assert system_cost(64, 25000.0, 700.0, NET, rented, 1e5)["cost_per_hour_usd"] == pytest.approx(160.0)


def test_estimate_prints_cost_columns_in_both_modes():
    for args in ([], ["--mode", "inference", "--pp", "1", "--batch-size", "8", "--input-len", "256",
                      "--output-len", "64"]):
        r = run_cli("estimate", *args, "--set", "cost.pue=1.2", "--format", "csv")
        assert r.returncode == 0, r.stderr
        head, row = r.stdout.splitlines()
        rec = dict(zip(head.split(","), row.split(",")))
        for col in ("device_cost_usd", "system_capex_usd", "system_power_w", "cost_per_hour_usd",
                    "cost_per_million_tokens_usd"):
            assert float(rec[col]) > 0
    r = run_cli("estimate", "--set", "cost.pue=0.5")
    assert r.returncode == 2 and "cost.pue" in r.stderr and "Traceback" not in r.stderr
