"""Silicon cost model: dies per wafer and yields by hand, monotonicity, chiplet crossover, analyst BOMs."""

import json
import math

import pytest
from conftest import run_cli
from hypothesis import given
from hypothesis import strategies as st

from llmsim.engine.cost.silicon import (
    Die,
    Package,
    device_cost,
    die_yield,
    dies_per_wafer,
    dies_per_wafer_simple,
)
from llmsim.spec.cost import PART_COLUMNS, accelerator_cost
from llmsim.spec.errors import SpecError


def test_dies_per_wafer_by_hand():
    # simple: pi 150^2 / A - pi 300 / sqrt(2 A)
    # 100 mm2: 706.86 - 66.64 = 640.2;  800 mm2: 88.36 - 23.56 = 64.8
    assert dies_per_wafer_simple(100) == pytest.approx(640.2, abs=0.1)
    assert dies_per_wafer_simple(800) == pytest.approx(64.8, abs=0.1)
    # Actuary: A' = A + 2 (0.2) sqrt(A) + 0.04, r = 145 mm: pi r^2 / A' - pi 290 / sqrt(2 A')
    # 100 mm2: A' = 104.04 -> 634.87 - 63.16 = 571.7;  800 mm2: A' = 811.35 -> 81.41 - 22.62 = 58.8
    assert dies_per_wafer(100) == pytest.approx(571.7, abs=0.1)
    assert dies_per_wafer(800) == pytest.approx(58.8, abs=0.1)


def test_yields_by_hand():
    # D0 = 0.1 /cm2: x = D0 A = 0.1 (100 mm2) and 0.8 (800 mm2)
    assert die_yield(100, 0.1, "poisson") == pytest.approx(math.exp(-0.1))  # 0.9048
    assert die_yield(100, 0.1, "murphy") == pytest.approx(((1 - math.exp(-0.1)) / 0.1) ** 2)  # 0.9056
    assert die_yield(100, 0.1, "seeds") == pytest.approx(1 / 1.1)  # 0.9091
    assert die_yield(100, 0.1, "negative-binomial") == pytest.approx(1.01 ** -10)  # 0.9053
    # 800 mm2 (x = 0.8): e^-0.8, ((1 - e^-0.8)/0.8)^2, 1/1.8, 1.08^-10 = 0.449 / 0.474 / 0.556 / 0.463
    assert die_yield(800, 0.1, "poisson") == pytest.approx(0.449, abs=5e-4)
    assert die_yield(800, 0.1, "murphy") == pytest.approx(0.474, abs=5e-4)
    assert die_yield(800, 0.1, "seeds") == pytest.approx(0.556, abs=5e-4)
    assert die_yield(800, 0.1, "negative-binomial") == pytest.approx(0.463, abs=5e-4)


PKG = Package(usd_per_mm2=0.02, area_factor=1.0, bond_yield_per_die=0.99, attach_yield=1.0, test_assembly_usd=0.0)


def _cost(area, d0, wafer=17000.0, pkg=PKG, count=1):
    return device_cost([Die("d", area, count, wafer, d0)], 0, 0.0, 0.0, 0.0, pkg)["device_cost_usd"]


@given(area=st.floats(20, 800), d0=st.floats(0.01, 1.0), grow=st.floats(1.01, 2.0))
def test_cost_rises_with_area_and_defect_density(area, d0, grow):
    assert _cost(area * grow, d0) > _cost(area, d0)
    assert _cost(area, d0 * grow) > _cost(area, d0)


@given(area=st.floats(20, 800), d0=st.floats(0.01, 1.0))
def test_negative_binomial_tends_to_poisson(area, d0):
    assert die_yield(area, d0, alpha=1e7) == pytest.approx(die_yield(area, d0, "poisson"), rel=1e-5)
    assert die_yield(area, d0, alpha=2) > die_yield(area, d0, "poisson")  # clustering helps big dies


def test_chiplets_beat_one_large_die_past_a_crossover_at_high_defect_density():
    # four chiplets of 1.1 A / 4 (10% die-to-die overhead, AMD ISSCC 2021), each bonded at 0.99
    def split(area, d0):
        return device_cost([Die("c", 1.1 * area / 4, 4, 17000.0, d0)], 0, 0.0, 0.0, 0.0, PKG)["device_cost_usd"]

    assert split(25, 0.5) > _cost(25, 0.5)  # small die: area overhead and bonding loss dominate
    assert split(800, 0.5) < _cost(800, 0.5)  # large die: yield dominates
    # the crossover moves to smaller areas as defects rise: at 100 mm2 one die wins at 0.1, chiplets at 0.5
    assert split(100, 0.1) > _cost(100, 0.1)
    assert split(100, 0.5) < _cost(100, 0.5)


@pytest.mark.parametrize("name,analyst", [("h100-sxm", 3320), ("b200", 6400), ("mi300x", 5300)])
def test_manufacturing_cost_within_35_percent_of_analyst_boms(registry, name, analyst):
    # analyst BOMs: Silicon Analysts cost bridge https://siliconanalysts.com/tools/cost-bridge
    cost = accelerator_cost(registry.get("accelerators", name))["device_cost_usd"]
    assert cost == pytest.approx(analyst, rel=0.35)


def test_cost_cli_csv_and_bad_input():
    r = run_cli("cost", "b200", "--format", "csv")
    assert r.returncode == 0, r.stderr
    head, row = r.stdout.splitlines()
    assert head.startswith("accelerator,device_cost_usd,logic_raw_usd,logic_yield_loss_usd,hbm_usd")
    parts = dict(zip(head.split(","), row.split(",")))
    total = sum(float(parts[k]) for k in PART_COLUMNS)
    assert float(parts["device_cost_usd"]) == pytest.approx(total)
    r = run_cli("cost", "h100-sxm", "--yield-model", "gaussian")
    assert r.returncode == 2 and "allowed: poisson" in r.stderr and "Traceback" not in r.stderr


def test_known_good_die_test_by_hand():
    # 800 mm2 at D0 0.1: NB yield 0.463 (above); sort $0.03/s x 60 s = $1.80 per die tested, every die
    # tested, so $1.80 / 0.463 = $3.89 per good die, and two dies pay twice
    out = device_cost([Die("d", 800, 2, 17000.0, 0.1)], 0, 0.0, 0.0, 0.0, PKG)
    assert out["kgd_test_usd"] == pytest.approx(2 * 1.80 / die_yield(800, 0.1))
    assert out["kgd_test_usd"] == pytest.approx(7.78, abs=0.01)


def test_h100_interposer_spans_six_hbm_sites_and_nre_shares_by_volume(registry):
    h100 = registry.get("accelerators", "h100-sxm")
    c = accelerator_cost(h100)
    # 1.1 x (814 mm2 die + 6 sites x 121 mm2) = 1,694 mm2 at $0.44 = $745.36 (5 stacks would be $686.8)
    assert c["interposer_mm2"] == pytest.approx(1694.0) and c["interposer_usd"] == pytest.approx(745.36)
    assert c["nre_usd"] == 0.0
    # NRE (Chiplet Actuary): die 449e6 x (0.8 x 814 / 300 + 0.2) = 449e6 x 2.37067 = $1,064.4M;
    # CoWoS-S interposer 33,600 x 1,694 + 6.72e6 = $63.64M; total $1,128.0M over 1M units = $1,128 each
    v = accelerator_cost(h100, volume=1e6)
    assert v["nre_total_usd"] == pytest.approx(449e6 * (0.8 * 814 / 300 + 0.2) + 33600 * 1694 + 6.72e6)
    assert v["nre_usd"] == pytest.approx(1128.0, abs=0.1)
    assert v["device_cost_usd"] == pytest.approx(c["device_cost_usd"] + v["nre_usd"])
    assert accelerator_cost(h100, volume=2e6)["nre_usd"] == pytest.approx(v["nre_usd"] / 2)
    with pytest.raises(SpecError, match="design_nre_usd"):  # no published design cost for A14
        accelerator_cost(h100.model_copy(update={"process_node": "a14"}), volume=1e6)


def test_cost_cli_volume():
    r = run_cli("cost", "h100-sxm", "--volume", "1000000", "--format", "json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)[0]
    assert row["nre_usd"] == pytest.approx(1128.0, abs=0.1) and row["volume"] == 1e6
    r = run_cli("cost", "h100-sxm", "--volume", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_graphics_memory_is_priced_on_the_board_not_on_an_interposer():
    # L40S: 48 GB of GDDR6 at $3.4/GB (DRAMeXchange spot, presets/technology/memory.yaml) = $163.20, on an
    # organic package (no interposer, no stacks to bond); it was costed at $0 as a part without HBM stacks
    from llmsim.spec.presets import PresetRegistry

    out = accelerator_cost(PresetRegistry([]).get("accelerators", "l40s"))
    assert out["hbm_usd"] == pytest.approx(48 * 3.4) and out["package"] == "organic"


def test_every_bundled_accelerator_costs_or_lacks_only_its_die_data(registry):
    # issue 39: spelling must never be the reason (mi325x's memory is "HBM3E" where the table says "HBM3e";
    # tpu-v4's node is "7 nm" where the table says "7nm"); a part whose die area or node is unpublished is
    # refused with that reason
    from llmsim.spec.cost import logic_node

    assert logic_node("7 nm", "test")[0] == "n7" and logic_node("TSMC  4NP", "test")[0] == "n5"
    refused = []
    for name in registry.names("accelerators"):
        spec = registry.get("accelerators", name)
        try:
            assert accelerator_cost(spec)["device_cost_usd"] > 0, name
        except SpecError as err:
            assert "needs die_area_mm2 and process_node" in str(err), (name, str(err))
            refused.append(name)
    mi325x = registry.get("accelerators", "mi325x")
    assert mi325x.hbm_generation == "HBM3E"
    spelled = mi325x.model_copy(update={"hbm_generation": "HBM3e"})
    assert accelerator_cost(mi325x)["device_cost_usd"] == accelerator_cost(spelled)["device_cost_usd"]
    assert "tpu-v4" not in refused and "mi325x" not in refused
