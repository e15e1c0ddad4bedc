"""A parallel group's path through the network: per tier, how many of its ranks share a domain and what
each rank gets there (bandwidth, latency, topology). ``topology.path_of`` builds one; the collectives
(``collectives.py``) are timed on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from llmsim.engine.calibration import PROTOCOLS

_LL_RATIO = PROTOCOLS["ll"][0]


@dataclass(frozen=True)
class Level:
    """A group's share of one network tier."""

    tier: str
    topology: str
    ranks: int  # group members per domain of this tier, relative to the level inside it
    bw_bytes_per_s: float  # achievable per rank per direction
    latency_s: float  # per algorithm step (Simple protocol)
    in_network_reduction: bool = False
    line_bw_bytes_per_s: float = 0.0  # per-direction line rate (for in-network reduction)
    torus_extents: tuple[int, ...] = ()  # extent of the group in each torus dimension it uses
    scale_up: bool = False  # the innermost (node / scale-up) tier
    ll_latency_s: float | None = None  # NCCL LL-protocol step where measured (None: latency_s x LL ratio)

    @property
    def ll_as_simple_s(self) -> float:
        """The step latency the LL protocol sees, in Simple-protocol units (the tuner multiplies every
        step latency by its protocol's ratio): ``latency_s`` unless a measured LL step is given."""
        return self.latency_s if self.ll_latency_s is None else self.ll_latency_s / _LL_RATIO


@dataclass(frozen=True)
class Path:
    levels: tuple[Level, ...]

    @cached_property
    def ranks(self) -> int:
        return math.prod(lv.ranks for lv in self.levels)

    @property
    def tier(self) -> str:
        return self.levels[-1].tier if self.levels else "-"

    @property
    def tiers(self) -> str:
        return "+".join(lv.tier for lv in self.levels) or "-"

    def resized(self, n: int) -> Path:
        """The same placement with ``n`` ranks (outer levels shrink first)."""
        return _resized(self, int(n))


@lru_cache(maxsize=4096)
def _resized(path: Path, n: int) -> Path:
    out, left = [], n
    for lv in path.levels:
        k = min(lv.ranks, left)
        if k > 1:
            out.append(replace(lv, ranks=k))
        left = max(1, left // max(k, 1))
    return Path(tuple(out))


def flat_path(bw_bytes_per_s: float, latency_s: float, tier: str = "link", ranks: int = 2,
              topology: str = "switch") -> Path:
    """A one-level path (tests, quick estimates)."""
    return Path((Level(tier, topology, ranks, bw_bytes_per_s, latency_s),))
