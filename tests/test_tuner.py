"""The collective tuner over many paths at once (network/tuner.py, as topology.group_collectives uses it
for a sweep's groups) gives the same times, bit for bit, and the same algorithm names as the tuner on
each path alone (collectives.collective_columns)."""

import numpy as np
import pytest

from llmsim.engine.columns import factorize
from llmsim.engine.network import topology as T
from llmsim.engine.network.collectives import collective_columns
from llmsim.spec.convert import network_values
from llmsim.spec.presets import PresetRegistry

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")


def _path_by_path(net, op, sizes, ranks, stride):
    """Each distinct group's path timed on its own (collectives.collective_columns)."""
    times, names = np.zeros(len(sizes)), np.full(len(sizes), None, dtype=object)
    code, first = factorize(ranks, stride)
    for c, row in enumerate(first):
        if ranks[row] <= 1:
            continue
        rows = np.flatnonzero(code == c)
        timed = collective_columns(op, sizes[rows], T.path_of(net, int(stride[row]), int(ranks[row])))
        times[rows], names[rows] = timed.times, timed.names(op)
    return times, names


@pytest.mark.parametrize("network", sorted(PresetRegistry([]).names("networks")))
def test_many_paths_at_once_match_each_path_alone(network):
    net = network_values(PresetRegistry([]).get("networks", network))
    rng = np.random.default_rng(7)
    for op in OPS:
        ranks = rng.choice([1, 2, 4, 8, 16, 64, 256, 1024], 400)
        stride = rng.choice([1, 2, 8, 64, 256], 400)
        keep = ranks * stride <= net.tiers[-1].size
        ranks, stride = ranks[keep], stride[keep]
        # sizes from 1 kB to 10 GB, some nothing at all
        sizes = np.where(rng.random(len(ranks)) < 0.05, 0.0, np.round(10 ** rng.uniform(3, 10, len(ranks)), -2))
        T._remembered.clear()
        got = T.group_collectives(net, op, sizes, ranks, stride)
        want_t, want_n = _path_by_path(net, op, sizes, ranks, stride)
        assert np.array_equal(got.times, want_t), (network, op)  # the same doubles
        assert got.names.tolist() == want_n.tolist(), (network, op)
