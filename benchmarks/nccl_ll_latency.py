"""Where the network presets' `ll_latency_us` come from, and how `llmsim collective --op all_reduce` compares
with the published small-message nccl-tests runs (not a test).

    python benchmarks/nccl_ll_latency.py [--plot docs/img/allreduce-small-messages.png]

Below ~1 MiB an NCCL all-reduce is latency-bound and runs the LL protocol: a fixed launch cost
(`calibration.COLLECTIVE_BASE_LATENCY_S`, NCCL's baseLat) plus a step latency per hop of the algorithm
(2 (n - 1) hops for a ring; 2 (k - 1 + log2 m) for NCCL's tree over m nodes of k). NCCL's own tuning model
puts the LL step at 0.6 us on NVLink and 2.7 us on the network (src/graph/tuning.cc, hwLat); measured
runs take longer. Each tier's LL step is solved here from one measured 8 KiB all-reduce (one process per
GPU, as inference engines and trainers run): the scale-up tier from a one-node run with the ring, the
scale-out tier from multi-node runs with the tree (the median of the runs, scale-up step fixed). The
other rows (other sizes, group sizes, boards) were not used and show how the law carries. Ratios are
llmsim's time over the measured one.
"""

from __future__ import annotations

import dataclasses
import statistics

from llmsim.engine.network.collectives import collective
from llmsim.engine.network.topology import path_of
from llmsim.spec.convert import network_values
from llmsim.spec.presets import PresetRegistry

A100_MPI = ("nccl-tests how-to (Chinese-language blog; `mpirun -np 8 ... -g 1` on 8x A100-SXM4-80GB, "
            "host 'thanos'; read from the code index, repository not named)")
A100_4GPU = ("rcgsheffield/sheffield_hpc stanage/software/libs/cuda.rst (Dell XE8545: 4x A100-SXM4-80GB, "
             "NVLink between each pair, no NVSwitch; `-g 4`, one process)")
DGXC = "NVIDIA/dgxc-benchmarking nccl/README.md (8x H100, one process per GPU)"
NT309 = "NVIDIA/nccl-tests#309 (H100, 8x NDR 400G per node)"

KIB = 1024
# (preset, tier the row solves for or None for a check, algorithm, source, label, ranks, bytes, measured us)
ROWS = [
    ("dgx-a100", 0, "ring", A100_MPI, "8x A100, one node", 8, 8 * KIB, 25.84),
    ("dgx-a100", None, None, A100_MPI, "8x A100, one node", 8, 32 * KIB, 30.25),
    ("dgx-a100", None, None, A100_MPI, "8x A100, one node", 8, 128 * KIB, 31.90),
    ("dgx-a100", None, None, A100_MPI, "8x A100, one node", 8, 512 * KIB, 28.11),
    ("dgx-a100", None, None, A100_MPI, "8x A100, one node", 8, 1024 * KIB, 37.89),
    ("dgx-a100", None, None, A100_4GPU, "4x A100, XE8545 board, -g 4", 4, 8 * KIB, 14.93),
    ("dgx-a100", None, None, A100_4GPU, "4x A100, XE8545 board, -g 4", 4, 32 * KIB, 19.80),
    ("dgx-h100", 0, "ring", DGXC, "8x H100, one node", 8, 8 * KIB, 17.4),
    ("dgx-h100", 1, "tree", NT309, "16x H100, 2 nodes", 16, 8 * KIB, 32.1),
    ("dgx-h100", 1, "tree", NT309, "32x H100, 4 nodes", 32, 8 * KIB, 46.8),
]


# The same 8x A100 MPI run, every size (out-of-place us), for the plot: 8 B - 4 GiB
A100_MPI_SWEEP = {
    8: 20.26, 16: 17.90, 32: 20.75, 64: 22.30, 128: 23.91, 256: 23.61, 512: 24.36, 1024: 24.43, 2048: 24.32,
    4096: 25.29, 8192: 25.84, 16384: 26.15, 32768: 30.25, 65536: 31.82, 131072: 31.90, 262144: 27.65,
    524288: 28.11, 1048576: 37.89, 2097152: 55.39, 4194304: 81.66, 8388608: 130.6, 16777216: 213.3,
    33554432: 377.6, 67108864: 615.7, 134217728: 1181.6, 268435456: 2218.2, 536870912: 4248.8,
    1073741824: 8244.5, 2147483648: 16288, 4294967296: 32285,
}


def plot(path: str, measured_step, nccl_model) -> None:
    """Measured 8x A100 all-reduce time against llmsim with NCCL's LL constant and with the measured step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(A100_MPI_SWEEP)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.loglog(sizes, [A100_MPI_SWEEP[b] for b in sizes], "ko", ms=4, label="measured (nccl-tests, mpirun -np 8)")
    ax.loglog(sizes, [time_us(nccl_model, 8, b) for b in sizes], "--", color="0.55",
              label="llmsim, NCCL's LL constant (0.6 us a hop)")
    ax.loglog(sizes, [time_us(measured_step, 8, b) for b in sizes], "-", color="tab:blue",
              label="llmsim, LL step measured at 8 KiB (1.34 us)")
    ax.axvline(8192, color="tab:blue", lw=0.6, ls=":")
    ax.set_xlabel("all-reduce buffer per GPU (bytes)")
    ax.set_ylabel("time (us)")
    ax.set_title("8x A100-SXM4-80GB all-reduce: measured vs llmsim (dgx-a100)")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    print(f"wrote {path}")


def with_ll(net, tier: int, ll_s: float):
    tiers = list(net.tiers)
    tiers[tier] = dataclasses.replace(tiers[tier], ll_latency_s=ll_s)
    return dataclasses.replace(net, tiers=tuple(tiers))


def time_us(net, n: int, size: float, algorithm: str | None = None) -> float:
    return collective("all_reduce", size, path_of(net, 1, n), algorithm).time_s * 1e6


def solve(net, tier: int, algorithm: str, n: int, size: float, measured_us: float) -> float:
    """The LL step (s) on ``tier`` at which ``algorithm`` takes the measured time (bisection)."""
    hi_limit = 50e-6
    lo, hi = 0.0, hi_limit
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if time_us(with_ll(net, tier, mid), n, size, algorithm) < measured_us else (lo, mid)
    step = (lo + hi) / 2
    if not 0 < step < hi_limit * 0.999:  # the measured time lies outside what the step can reach
        raise SystemExit(f"{n} ranks, {size} B: no LL step in (0, {hi_limit * 1e6:.0f} us) gives {measured_us} us")
    return step


def main(argv: list[str]) -> None:
    registry = PresetRegistry()
    nccl_model = {p: network_values(registry.get("networks", p)) for p in {r[0] for r in ROWS}}
    nccl_model = {p: dataclasses.replace(net, tiers=tuple(dataclasses.replace(t, ll_latency_s=None)
                                                          for t in net.tiers)) for p, net in nccl_model.items()}
    derived: dict[tuple[str, int], float] = {}
    for tier in (0, 1):  # the scale-up step first: the multi-node rows need it
        for preset in sorted(nccl_model):
            fits = [solve(_derived_net(nccl_model[preset], preset, derived), tier, alg, n, size, us)
                    for p, t, alg, _, _, n, size, us in ROWS if p == preset and t == tier]
            if fits:
                derived[(preset, tier)] = round(statistics.median(fits) * 1e6, 2) * 1e-6
                print(f"{preset} tier {tier}: LL step {derived[(preset, tier)] * 1e6:.2f} us "
                      f"(rows: {', '.join(f'{x * 1e6:.2f}' for x in fits)})")
    print()
    print("| system | size | measured | llmsim, NCCL's hwLat | llmsim, measured LL step | used to set it | source |")
    print("|---|---|---|---|---|---|---|")
    for preset, tier, _, source, label, n, size, us in ROWS:
        shipped = network_values(registry.get("networks", preset))
        old, new = time_us(nccl_model[preset], n, size), time_us(shipped, n, size)
        print(f"| {label} | {size // KIB} KiB | {us:.1f} us | {old:.1f} us ({old / us:.2f}x) "
              f"| {new:.1f} us ({new / us:.2f}x) | {'yes' if tier is not None else 'no'} | {source} |")
    for (preset, tier), value in derived.items():
        shipped = network_values(registry.get("networks", preset)).tiers[tier].ll_latency_s
        print(f"{preset} tier {tier}: derived {value * 1e6:.2f} us, preset "
              f"{'none' if shipped is None else f'{shipped * 1e6:.2f} us'}")
    if argv[:1] == ["--plot"] and len(argv) == 2:
        plot(argv[1], network_values(registry.get("networks", "dgx-a100")), nccl_model["dgx-a100"])


def _derived_net(net, preset: str, derived: dict):
    for (p, tier), value in derived.items():
        if p == preset:
            net = with_ll(net, tier, value)
    return net


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
