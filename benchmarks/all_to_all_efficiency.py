"""Where `ALL_TO_ALL_SCALEOUT_EFFICIENCY` comes from, and how `llmsim collective --op all_to_all` compares
with every published multi-node all-to-all measurement it was derived from (not a test).

    python benchmarks/all_to_all_efficiency.py

Across nodes each rank sends the (n - k)/n of its buffer meant for other nodes through its own NIC
(k ranks per node), so a measured time t of an all-to-all of S bytes per rank gives the share of the NIC's
line rate the collective reached: S (n - k)/n / t / line. nccl-tests reports busbw = algbw (n - 1)/n with
algbw = S / t. The constant is the median over sources of each source's median (one vote per source),
rounded to two digits. Each source left out in turn is predicted with the constant the other two give.
"""

from __future__ import annotations

import statistics

from llmsim.engine import calibration as cal
from llmsim.engine.network.collectives import collective
from llmsim.engine.network.topology import path_of
from llmsim.spec.convert import network_values
from llmsim.spec.presets import PresetRegistry
from llmsim.validation.calibrate import constants

MCORE = "Megatron Core MoE report, arXiv 2603.07685, Table 7 (H100, all-to-all dispatcher)"
GTC = "NVIDIA GTC25 talk S72583, slide 13 (nccl-tests alltoall busbw)"
NT355 = "NVIDIA/nccl-tests#355, comment of 2025-10-31 (NCCL 2.28.7)"
DSV3_TOKENS = 4096 * 8 * 7168 * 2  # seq 4096 x top-8 x hidden 7168 x 2 bytes (bf16), per GPU

# (source, label, network preset, ranks, bytes per rank, measured time s or None, measured busbw B/s or None)
ROWS = [
    (GTC, "32x H100, 4 nodes", "dgx-h100", 32, 2**30, None, 48e9),
    (GTC, "32x A100, 4 nodes", "dgx-a100", 32, 2**30, None, 24e9),
    (NT355, "16x H100, 2 nodes, 4 GiB", "dgx-h100", 16, 2**32, None, 80e9),
    (MCORE, "EP16 dispatch", "dgx-h100", 16, DSV3_TOKENS, 5774e-6, None),
    (MCORE, "EP16 combine", "dgx-h100", 16, DSV3_TOKENS, 5628e-6, None),
    (MCORE, "EP32 dispatch", "dgx-h100", 32, DSV3_TOKENS, 8059e-6, None),
    (MCORE, "EP32 combine", "dgx-h100", 32, DSV3_TOKENS, 7815e-6, None),
    (MCORE, "EP64 dispatch", "dgx-h100", 64, DSV3_TOKENS, 9164e-6, None),
    (MCORE, "EP64 combine", "dgx-h100", 64, DSV3_TOKENS, 8727e-6, None),
]
PER_NODE = 8  # every system above is 8 GPUs per node


def measured_time(n: int, size: float, t: float | None, busbw: float | None) -> float:
    return t if t is not None else size / (busbw * n / (n - 1))


def nic_share(n: int, size: float, t: float, line_bytes_per_s: float) -> float:
    """The share of the NIC line rate the measured all-to-all reached."""
    return size * (n - PER_NODE) / n / t / line_bytes_per_s


def derive(medians: dict[str, float]) -> float:
    return round(statistics.median(medians.values()), 2)


def predicted(net, n: int, size: float, value: float) -> float:
    with constants({"ALL_TO_ALL_SCALEOUT_EFFICIENCY": value}):
        return collective("all_to_all", size, path_of(net, 1, n)).time_s


def main() -> None:
    registry = PresetRegistry()
    rows, by_source = [], {}
    for source, label, preset, n, size, t, busbw in ROWS:
        net = network_values(registry.get("networks", preset))
        t_meas = measured_time(n, size, t, busbw)
        share = nic_share(n, size, t_meas, net.tiers[1].bw_bytes_per_s)
        by_source.setdefault(source, []).append(share)
        rows.append((source, label, net, n, size, t_meas, share))
    medians = {s: statistics.median(v) for s, v in by_source.items()}
    value = derive(medians)
    print("| source | run | measured | llmsim | rate error | left out: constant, rate error | NIC share |")
    print("|---|---|---|---|---|---|---|")
    for source, label, net, n, size, t_meas, share in rows:
        t_pred = predicted(net, n, size, value)
        held = derive({s: m for s, m in medians.items() if s != source})
        t_held = predicted(net, n, size, held)
        print(f"| {source.split(',')[0]} | {label} | {t_meas * 1e3:.2f} ms | {t_pred * 1e3:.2f} ms "
              f"| {100 * (t_meas / t_pred - 1):+.1f}% | {held}: {100 * (t_meas / t_held - 1):+.1f}% | {share:.3f} |")
    for s, m in medians.items():
        print(f"median {m:.3f}  {s}")
    print(f"median over sources: {statistics.median(medians.values()):.3f} -> {value}"
          f" (calibration.ALL_TO_ALL_SCALEOUT_EFFICIENCY = {cal.ALL_TO_ALL_SCALEOUT_EFFICIENCY})")


if __name__ == "__main__":
    main()
