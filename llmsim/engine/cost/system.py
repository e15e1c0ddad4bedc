"""System capex, power and cost of ownership of a cluster, and cost per token.

capex  = devices x (device price + host share) + scale-out switch ports and links (per tier crossed)
power  = devices x (device TDP + host share) x PUE (devices drawn at TDP: an upper bound)
$/hour = capex / amortisation hours + power x electricity price, or a cloud price per device-hour
$/Mtok = $/hour / (tokens/s x 3600) x 1e6;  J/token = power / tokens/s
"""

from __future__ import annotations

import math

import numpy as np

from llmsim.engine.columns import per_key
from llmsim.engine.types import CostRates, Network

HOURS_PER_YEAR = 8766.0  # 365.25 days


def fat_tree_levels(endpoints: int, radix: int) -> int:
    """Switch levels of a folded Clos of radix-k switches: one switch holds k endpoints, two levels
    k^2/2, three k^3/4 (Al-Fares et al. 2008, SIGCOMM, k-ary fat-tree)."""
    if endpoints <= radix:
        return 1
    return 2 if endpoints <= radix * radix / 2 else 3


def scale_out_per_device(net: Network, devices: int, radix: int) -> tuple[float, float]:
    """(switch ports, links) per device over the tiers beyond the scale-up domain that ``devices`` span.
    A fat-tree of L levels takes 1 + 2 (L - 1) / oversubscription switch ports and 1 + (L - 1) /
    oversubscription links per endpoint; other topologies one port and one link."""
    ports = links = 0.0
    for inner, tier in zip(net.tiers, net.tiers[1:], strict=False):
        if devices <= inner.size:
            break
        if tier.topology == "fat-tree":
            # a system needs the levels its size does, at most the tier's own
            needed = fat_tree_levels(math.ceil(devices), tier.radix or radix)
            levels = min(tier.levels, needed) if tier.levels else needed
            up = (levels - 1) / tier.oversubscription
            ports, links = ports + 1 + 2 * up, links + 1 + up
        else:
            ports, links = ports + 1, links + 1
    return ports, links


def system_cost(devices: int, device_price_usd: float, tdp_w: float, net: Network, r: CostRates,
                tokens_per_s: float) -> dict:
    """Cost columns of a design point (output contract in docs/columns.md)."""
    cols = system_cost_columns(np.array([devices]), device_price_usd, tdp_w, net, r, np.array([tokens_per_s]))
    return {k: float(v[0]) for k, v in cols.items()}


def system_cost_columns(devices, device_price_usd: float, tdp_w: float, net: Network, r: CostRates,
                        tokens_per_s) -> dict:
    """Cost columns of design points: ``devices`` and ``tokens_per_s`` are arrays."""
    ports, links = per_key(lambda d: scale_out_per_device(net, d, r.switch_radix), devices)
    price = r.device_price_usd if r.device_price_usd is not None else device_price_usd
    network = devices * (ports * r.switch_port_usd + links * r.link_usd)
    capex = devices * (price + r.host_usd_per_device) + network
    power_w = devices * (tdp_w + r.host_power_w_per_device) * r.pue
    if r.cloud_usd_per_device_hour is not None:
        per_hour = devices * r.cloud_usd_per_device_hour
    else:
        per_hour = capex / (r.amortization_years * HOURS_PER_YEAR) + power_w / 1e3 * r.electricity_usd_per_kwh
    rate = np.where(tokens_per_s > 0, tokens_per_s, np.nan)
    return {
        "device_price_usd": np.broadcast_to(float(price), devices.shape), "network_capex_usd": network,
        "system_capex_usd": capex, "system_power_w": power_w, "cost_per_hour_usd": per_hour,
        "energy_per_token_j": power_w / rate,
        "cost_per_million_tokens_usd": per_hour / (rate * 3600) * 1e6,
    }
