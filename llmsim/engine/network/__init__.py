"""Communication: a parallel group's ``path`` through the network tiers (``topology.py`` places it),
the alpha-beta cost of each collective algorithm on one level (``algorithms.py``), the one tuner that
times every candidate on arrays of (path, message size) pairs and keeps the fastest (``tuner.py``), and
a collective on one path with its launch cost and name (``collectives.py``). Part of the engine: imports
only ``llmsim.engine``.
"""


def clear_caches() -> None:
    """Forget remembered collective times and group paths: they read calibration constants (link
    efficiencies, protocols), so a change of those must drop them."""
    from llmsim.engine.network import groups, path, topology, tuner

    tuner.forget()
    groups._remembered.clear()
    topology.path_of.cache_clear()
    path._resized.cache_clear()
