"""Silicon and package cost of an accelerator: dies per wafer, yield, known-good dies, 2.5D assembly, HBM.

Formulas follow ../shared/data/hardware.md sec. 3 (the Chiplet Actuary, Feng & Ma, DAC 2022, arXiv
2203.12268, and the yield literature). A package holds logic dies (one or several chiplets, each on its
node) and HBM stacks on an interposer; it is built from known-good dies (KGD), and a failed assembly
loses every good die in it:
  cost of a good package = (sum of KGD + interposer) / (bond yield^dies x attach yield) + final test.
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
    """Fraction of good dies of ``area_mm2`` at defect density ``d0_per_cm2`` (hardware.md sec. 3.2)."""
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


@dataclass(frozen=True)
class DieCost:
    name: str
    count: int
    dies_per_wafer: float
    yield_: float
    raw_usd: float  # wafer / DPW, per die
    good_usd: float  # wafer / (DPW x yield), per known-good die


def die_cost(d: Die, model: str = "negative-binomial") -> DieCost:
    dpw = dies_per_wafer(d.area_mm2)
    y = die_yield(d.area_mm2, d.d0_per_cm2, model)
    return DieCost(d.name, d.count, float(dpw), float(y), d.wafer_usd / dpw, d.wafer_usd / (dpw * y))


@dataclass(frozen=True)
class Package:
    usd_per_mm2: float  # interposer / package price per mm2
    area_factor: float  # interposer area / placed silicon area
    bond_yield_per_die: float
    attach_yield: float
    test_assembly_usd: float


def device_cost(dies: list[Die], hbm_stacks: int, hbm_footprint_mm2: float, hbm_gb: float,
                hbm_usd_per_gb: float, pkg: Package, model: str = "negative-binomial") -> dict:
    """Cost breakdown of one good packaged accelerator (USD); ``device_cost_usd`` is the total."""
    costs = [die_cost(d, model) for d in dies]
    logic_good = sum(c.good_usd * c.count for c in costs)
    logic_raw = sum(c.raw_usd * c.count for c in costs)
    hbm = hbm_gb * hbm_usd_per_gb
    placed = sum(d.area_mm2 * d.count for d in dies if not d.stacked) + hbm_stacks * hbm_footprint_mm2
    interposer_mm2 = pkg.area_factor * placed
    interposer = interposer_mm2 * pkg.usd_per_mm2
    n = sum(d.count for d in dies) + hbm_stacks
    assembly_yield = pkg.bond_yield_per_die ** n * pkg.attach_yield
    # a failed assembly scraps the package and every known-good die in it (Chiplet Actuary, chip-last)
    assembly_loss = (logic_good + hbm + interposer) * (1 / assembly_yield - 1)
    total = logic_good + hbm + interposer + assembly_loss + pkg.test_assembly_usd
    return {
        "logic_raw_usd": logic_raw,
        "logic_yield_loss_usd": logic_good - logic_raw,
        "hbm_usd": hbm,
        "interposer_usd": interposer,
        "assembly_loss_usd": assembly_loss,
        "test_assembly_usd": pkg.test_assembly_usd,
        "device_cost_usd": total,
        "interposer_mm2": interposer_mm2,
        "assembly_yield": assembly_yield,
        "dies": [{"die": c.name, "count": c.count, "dies_per_wafer": c.dies_per_wafer, "yield": c.yield_,
                  "raw_usd": c.raw_usd, "good_usd": c.good_usd} for c in costs],
    }
