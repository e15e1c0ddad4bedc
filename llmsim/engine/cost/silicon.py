"""Silicon and package cost of an accelerator: dies per wafer, yield, known-good dies, 2.5D assembly, HBM.

Formulas follow the Chiplet Actuary (Feng & Ma, DAC 2022, github.com/Yinxiao-Feng/chiplet-actuary, arXiv
2203.12268, and the yield literature). A package holds logic dies (one or several chiplets, each on its
node) and HBM stacks on an interposer; it is built from known-good dies (KGD), and a failed assembly
loses every good die in it:
  cost of a good package = (sum of KGD + KGD test + interposer) / (bond yield^dies x attach yield)
                           + final test (+ NRE / volume when a production volume is given).
All functions take plain numbers or numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WAFER_DIAMETER_MM = 300.0
EDGE_EXCLUSION_MM = 5.0  # Chiplet Actuary chip.py: usable radius = d/2 - 5 mm
SCRIBE_MM = 0.2  # Chiplet Actuary: scribe lane added around each die
NB_CLUSTERING = 10.0  # negative-binomial clustering parameter for logic (Chiplet Actuary "critical level")

# Known-good-die (wafer sort) test: cost per good die = tester rate x sort time / die yield, every die
# tested in full (Bushnell & Agrawal, "Essentials of Electronic Testing", sec. 1.3: C = C_t (T_g + T_b
# (1/Y - 1)) with T_b = T_g). Tester rate: an ATE system costs $1-10M (chipfoundryservices.com, "ATE
# economics"); $5M over 5 years of round-the-clock use is 5e6 / (5 x 3.15e7 s) = $0.032/s. Sort time per
# large AI die: no public figure; 60 s is an assumption (a generous one: scan and memory BIST of a
# reticle-sized die), and at $0.03/s it adds ~$4 to an 800 mm2 die that yields 45%.
TESTER_USD_PER_S = 0.03
SORT_TEST_S = 60.0

# NRE of one die type with every module new (Chiplet Actuary, Feng & Ma 2022, parameter.ini / spec.py):
# modules 0.5 x NRE_node / 300 per mm2, chip 0.3 x NRE_node / 300 per mm2, masks and tape-out 0.2 x
# NRE_node, NRE_node being the design cost of a 300 mm2 chip on the node (logic.yaml design_nre_usd).
NRE_PER_MM2_OF_NODE = (0.5 + 0.3) / 300
NRE_FIXED_OF_NODE = 0.2


def dies_per_wafer_simple(area_mm2, diameter_mm=WAFER_DIAMETER_MM):
    """Hennessy & Patterson: pi (d/2)^2 / A - pi d / sqrt(2 A)."""
    return math.pi * (diameter_mm / 2) ** 2 / area_mm2 - math.pi * diameter_mm / np.sqrt(2 * area_mm2)


def dies_per_wafer(area_mm2, diameter_mm=WAFER_DIAMETER_MM, edge_mm=EDGE_EXCLUSION_MM, scribe_mm=SCRIBE_MM):
    """Chiplet Actuary variant: die grown by the scribe lane (A' = A + 2 s sqrt(A) + s^2), usable radius
    r = d/2 - e: pi r^2 / A' - pi (d - 2e) / sqrt(2 A')."""
    a = area_mm2 + 2 * scribe_mm * np.sqrt(area_mm2) + scribe_mm ** 2
    r = diameter_mm / 2 - edge_mm
    return math.pi * r * r / a - math.pi * (diameter_mm - 2 * edge_mm) / np.sqrt(2 * a)


def die_yield(area_mm2, d0_per_cm2, model: str = "negative-binomial", alpha: float = NB_CLUSTERING):
    """Fraction of good dies of ``area_mm2`` at defect density ``d0_per_cm2`` (negative binomial as in the
    Chiplet Actuary, Feng & Ma, DAC 2022, arXiv 2203.12268; Poisson, Murphy 1964, Seeds, Moore)."""
    x = d0_per_cm2 * area_mm2 / 100.0  # expected defects per die (A in cm2)
    if model == "poisson":
        return np.exp(-x)
    if model == "murphy":  # Murphy 1964
        x = np.maximum(x, 1e-12)
        return ((1 - np.exp(-x)) / x) ** 2
    if model == "seeds":
        return 1 / (1 + x)
    if model == "moore":
        return np.exp(-np.sqrt(x))
    if model == "negative-binomial":  # Stapper; alpha -> inf gives Poisson
        return (1 + x / alpha) ** (-alpha)
    raise ValueError(f"unknown yield model {model!r}; known: {', '.join(YIELD_MODELS)}")


YIELD_MODELS = ("poisson", "murphy", "seeds", "moore", "negative-binomial")


@dataclass(frozen=True)
class Die:
    name: str
    area_mm2: float
    count: int
    wafer_usd: float
    d0_per_cm2: float
    stacked: bool = False  # 3D-bonded on another die: no interposer area of its own
    design_nre_usd: float | None = None  # the node's design cost of a 300 mm2 chip (NRE; None: unknown)


@dataclass(frozen=True)
class DieCost:
    name: str
    count: int
    dies_per_wafer: float
    yield_: float
    raw_usd: float  # wafer / DPW, per die
    good_usd: float  # wafer / (DPW x yield), per known-good die
    test_usd: float  # wafer sort, per known-good die


def die_cost(d: Die, model: str = "negative-binomial") -> DieCost:
    dpw = dies_per_wafer(d.area_mm2)
    y = die_yield(d.area_mm2, d.d0_per_cm2, model)
    return DieCost(d.name, d.count, float(dpw), float(y), d.wafer_usd / dpw, d.wafer_usd / (dpw * y),
                   TESTER_USD_PER_S * SORT_TEST_S / float(y))


def die_nre(d: Die) -> float:
    """Design, masks and tape-out of one die type (Chiplet Actuary): paid once, whatever the count."""
    if d.design_nre_usd is None:
        raise ValueError(f"die {d.name!r}: its node has no design cost (design_nre_usd)")
    return d.design_nre_usd * (NRE_PER_MM2_OF_NODE * d.area_mm2 + NRE_FIXED_OF_NODE)


@dataclass(frozen=True)
class Package:
    usd_per_mm2: float  # interposer / package price per mm2
    area_factor: float  # interposer area / placed silicon area
    bond_yield_per_die: float
    attach_yield: float
    test_assembly_usd: float
    nre_usd_per_mm2: float = 0.0  # interposer / substrate design and masks per mm2 (Chiplet Actuary)
    nre_fixed_usd: float = 0.0


def device_cost(dies: list[Die], hbm_stacks: int, hbm_footprint_mm2: float, hbm_gb: float,
                hbm_usd_per_gb: float, pkg: Package, model: str = "negative-binomial", hbm_sites: int | None = None,
                volume: float | None = None) -> dict:
    """Cost breakdown of one good packaged accelerator (USD); ``device_cost_usd`` is the total. The
    interposer spans ``hbm_sites`` HBM sites (default: the stacks; H100 has 6 sites, 5 stacks active);
    with a production ``volume`` the dies' and the package's NRE are shared over it (``nre_usd``)."""
    costs = [die_cost(d, model) for d in dies]
    logic_good = sum(c.good_usd * c.count for c in costs)
    logic_raw = sum(c.raw_usd * c.count for c in costs)
    kgd_test = sum(c.test_usd * c.count for c in costs)
    hbm = hbm_gb * hbm_usd_per_gb
    sites = max(hbm_sites or 0, hbm_stacks)
    placed = sum(d.area_mm2 * d.count for d in dies if not d.stacked) + sites * hbm_footprint_mm2
    interposer_mm2 = pkg.area_factor * placed
    interposer = interposer_mm2 * pkg.usd_per_mm2
    n = sum(d.count for d in dies) + hbm_stacks
    assembly_yield = pkg.bond_yield_per_die ** n * pkg.attach_yield
    # a failed assembly scraps the package and every known-good (tested) die in it (Chiplet Actuary, chip-last)
    assembly_loss = (logic_good + kgd_test + hbm + interposer) * (1 / assembly_yield - 1)
    nre_total = (sum(die_nre(d) for d in dies) + pkg.nre_usd_per_mm2 * interposer_mm2 + pkg.nre_fixed_usd
                 if volume else 0.0)
    nre = nre_total / volume if volume else 0.0
    total = logic_good + kgd_test + hbm + interposer + assembly_loss + pkg.test_assembly_usd + nre
    return {
        "logic_raw_usd": logic_raw,
        "logic_yield_loss_usd": logic_good - logic_raw,
        "hbm_usd": hbm,
        "interposer_usd": interposer,
        "assembly_loss_usd": assembly_loss,
        "test_assembly_usd": pkg.test_assembly_usd,
        "kgd_test_usd": kgd_test,
        "nre_usd": nre,
        "device_cost_usd": total,
        "nre_total_usd": nre_total,
        "interposer_mm2": interposer_mm2,
        "assembly_yield": assembly_yield,
        "dies": [{"die": c.name, "count": c.count, "dies_per_wafer": c.dies_per_wafer, "yield": c.yield_,
                  "raw_usd": c.raw_usd, "good_usd": c.good_usd, "test_usd": c.test_usd} for c in costs],
    }
