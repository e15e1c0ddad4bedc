"""Placing parallel groups on the network's tiers.

Ranks are numbered with the dimensions of ``parallel.order`` innermost first (default tp, cp, ep, dp, pp,
as Megatron-LM lays them out). A group of ``n`` ranks whose members sit ``stride`` ranks apart spans
``stride * n`` consecutive ranks and so stays inside the first tier at least that large; a group that
spans tiers pays the outermost one (its slowest link), reduced by that tier's oversubscription.
"""

from __future__ import annotations

from llmsim.engine import calibration as cal
from llmsim.engine.collectives import Link
from llmsim.values import Network


def strides(order: tuple[str, ...], degrees: dict[str, int]) -> dict[str, int]:
    out, acc = {}, 1
    for dim in order:
        out[dim] = acc
        acc *= degrees[dim]
    return out


def tier_index(network: Network, span) -> int:
    """Index of the innermost tier whose groups hold ``span`` consecutive ranks."""
    for i, tier in enumerate(network.tiers):
        if span <= tier.size:
            return i
    return len(network.tiers) - 1


def tier_link(network: Network, index: int) -> Link:
    tier = network.tiers[index]
    eff = cal.SCALEUP_LINK_EFFICIENCY if index == 0 else cal.SCALEOUT_LINK_EFFICIENCY
    return Link(bw_bytes_per_s=tier.bw_bytes_per_s * eff / tier.oversubscription, latency_s=tier.latency_s,
                tier=tier.name, in_network_reduction=tier.in_network_reduction)


def group_link(network: Network, order: tuple[str, ...], degrees: dict[str, int], dim: str) -> Link:
    """The link a ``dim`` group communicates over: the bandwidth of the outermost tier it spans, and the
    mean per-step latency of a ring through it, whose hops stay inside the inner tiers except where the
    ring crosses from one inner domain to the next (NCCL rings: one network hop per node)."""
    index = tier_index(network, group_span(order, degrees, dim))
    link = tier_link(network, index)
    n = degrees[dim]
    if index == 0 or n <= 1:
        return link
    stride = strides(order, degrees)[dim]
    latency, remaining = 0.0, 1.0  # share of ring hops not yet assigned to a tier
    for tier in network.tiers[:index]:
        per_domain = min(n, max(1, tier.size // stride))  # group members inside one domain of this tier
        inside = remaining * (1 - 1 / per_domain)
        latency += inside * tier.latency_s
        remaining -= inside
    latency += remaining * network.tiers[index].latency_s
    return Link(link.bw_bytes_per_s, latency, link.tier, link.in_network_reduction)


def neighbour_link(network: Network, order: tuple[str, ...], degrees: dict[str, int], dim: str) -> Link:
    """The link between a rank and its next ``dim`` neighbour (pipeline send/recv)."""
    stride = strides(order, degrees)[dim]
    return tier_link(network, tier_index(network, 2 * stride if degrees[dim] > 1 else 1))



def group_span(order: tuple[str, ...], degrees: dict[str, int], dim: str) -> int:
    """Consecutive ranks a ``dim`` group spans."""
    return strides(order, degrees)[dim] * degrees[dim]
