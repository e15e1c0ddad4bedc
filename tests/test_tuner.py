"""The collective tuner over many paths at once (network/tuner.py, as groups.group_collectives uses it
for a sweep's groups) gives the same times, bit for bit, and the same algorithm names as the tuner on
each path alone (collectives.collective_columns)."""

import numpy as np
import pytest
from conftest import one_network_per_shape

from llmsim.engine.columns import factorize
from llmsim.engine.network import groups as T
from llmsim.engine.network.collectives import collective_columns
from llmsim.spec.convert import network_values
from llmsim.spec.presets import PresetRegistry

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """Nothing remembered: each side computes its own answer (the tuner's memo would hand the one path
    alone what the many paths at once put there)."""
    from llmsim.engine.network import tuner

    monkeypatch.setattr(tuner, "REMEMBERED_PER_CALL", 0)


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


@pytest.mark.parametrize("network", one_network_per_shape())
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


def test_a_group_placed_on_fewer_ranks_than_it_has_sends_nothing():
    # path_ranks 1: the group's path has no level with two ranks, so nothing is timed for those rows (as
    # collective_columns on that path), beside a group of 8 that is
    net = network_values(PresetRegistry([]).get("networks", "dgx-h100"))
    T._remembered.clear()
    got = T.group_collectives(net, "all_reduce", np.array([1e6, 1e6]), np.array([2, 8]), np.array([1, 1]),
                              path_ranks=np.array([1, 8]))
    alone = collective_columns("all_reduce", np.array([1e6]), T.path_of(net, 1, 8).resized(8))
    assert got.times[0] == 0.0 and got.times[1] == alone.times[0]
    assert got.names[0] is None and got.names[1] == alone.names("all_reduce")[0]


def test_many_sizes_at_once_are_tuned_without_being_remembered():
    from llmsim.engine.network import tuner

    net = network_values(PresetRegistry([]).get("networks", "dgx-h100"))
    sizes = np.arange(1, 20_001) * 1000.0  # 20,000 distinct sizes on two paths
    ranks = np.where(np.arange(20_000) % 2 == 0, 4, 8)
    tuner.forget()
    T._remembered.clear()
    got = T.group_collectives(net, "all_reduce", sizes, ranks, np.ones(20_000, dtype=np.int64))
    want, _ = _path_by_path(net, "all_reduce", sizes, ranks, np.ones(20_000, dtype=np.int64))
    assert np.array_equal(got.times, want) and tuner._count[0] == 0
