"""Placing parallel groups on the network's tiers.

Ranks are numbered with the dimensions of ``parallel.order`` innermost first (default tp, cp, ep, dp, pp,
as Megatron-LM lays them out). A group of ``n`` ranks whose members sit ``stride`` ranks apart has
min(n, tier_size / stride) members inside one domain of each tier; the ratio between consecutive tiers
is that level's rank count in the group's ``Path``. What a rank gets on a level depends on the tier's
topology: a switch or fat-tree gives its full per-device bandwidth (a fat-tree divided by its
oversubscription once the group leaves a leaf switch); a dragonfly its global-link share once the group
leaves a dragonfly group; a torus the links of the dimensions the group spans.
"""

from __future__ import annotations

import math
from functools import lru_cache

from llmsim.engine import calibration as cal
from llmsim.engine.network.path import Level, Path
from llmsim.engine.types import Network, Tier


def strides(order: tuple[str, ...], degrees: dict[str, int]) -> dict[str, int]:
    out, acc = {}, 1
    for dim in order:
        out[dim] = acc
        acc = acc * degrees[dim]  # not *=: with numpy degrees that would alter the strides stored above
    return out


def torus_extents(dims: tuple[int, ...], stride: int, count: int) -> tuple[int, ...]:
    """Extent in each torus dimension (filled in order) of ``count`` ranks ``stride`` apart."""
    out = []
    for d in dims:
        if count <= 1:
            break
        if stride >= d:
            stride = max(1, stride // d)
            continue
        e = min(count, max(1, d // stride))
        out.append(e)
        count = math.ceil(count / e)
        stride = 1
    return tuple(out)


def _level(network: Network, i: int, ranks: int, stride: int, span: int) -> Level:
    """What each of a group's ranks gets on tier ``i``; ``stride`` and ``span`` in devices."""
    tier: Tier = network.tiers[i]
    eff = cal.SCALEUP_LINK_EFFICIENCY if i == 0 else cal.SCALEOUT_LINK_EFFICIENCY
    bw = tier.bw_bytes_per_s * eff
    extents: tuple[int, ...] = ()
    inner_size = network.tiers[i - 1].size if i else 1
    if tier.topology == "fat-tree":
        # a leaf switch has radix/2 down-ports: radix/2 nodes per rail when rail-optimised (each GPU's NIC
        # on its own rail), else radix/2 NICs; beyond a leaf the traffic meets the oversubscribed uplinks
        # (no radix given: every group on this tier is taken to cross the spine)
        leaf = tier.radix // 2 * (inner_size if tier.rail_optimized else 1) if tier.radix else 0
        if span > leaf:
            bw /= tier.oversubscription
    elif tier.topology == "dragonfly":
        if tier.group_size and span > tier.group_size and tier.global_bw_bytes_per_s:
            bw = min(bw, tier.global_bw_bytes_per_s * eff)
    elif tier.topology in ("torus2d", "torus3d"):
        extents = torus_extents(tier.dims, max(1, stride // inner_size), ranks)
        bw = bw * len(extents) / len(tier.dims)  # the used dimensions' links of the rank's 2*D links
    elif tier.topology == "ring":
        pass  # both directions of the ring: the tier's figure already counts the two links
    else:  # switch, full-mesh: oversubscription if the preset gives one
        bw /= tier.oversubscription
    return Level(tier.name, tier.topology, ranks, bw, tier.latency_s, tier.in_network_reduction,
                 tier.bw_bytes_per_s, extents, scale_up=i == 0, ll_latency_s=tier.ll_latency_s)


def _members(n: int, inside: int, room: int) -> int:
    """Group members per domain of a tier that has ``room`` for them: the largest multiple of ``inside``
    dividing ``n`` that fits, so that every domain holds the same share (a group of 16 ranks 8 apart on
    72-GPU racks counts as 2 racks of 8, not 9 + 7)."""
    if room >= n:
        return n
    rest = n // inside
    return inside * max(d for d in range(1, rest + 1) if rest % d == 0 and inside * d <= max(room, inside))


@lru_cache(maxsize=4096)
def path_of(network: Network, stride: int, n: int) -> Path:
    """Path of ``n`` ranks ``stride`` apart (cached: a sweep places the same few groups again and again)."""
    levels, inside = [], 1
    for i, tier in enumerate(network.tiers):
        last = i == len(network.tiers) - 1
        members = n if last else _members(n, inside, max(1, tier.size // stride))
        if members > inside:
            levels.append(_level(network, i, members // inside, stride, stride * members))
            inside = members
        if inside >= n:
            break
    return Path(tuple(levels))


def group_path(network: Network, order: tuple[str, ...], degrees: dict[str, int], dim: str) -> Path:
    """The path a ``dim`` group communicates over."""
    return path_of(network, strides(order, degrees)[dim], degrees[dim])
