"""Communication: a parallel group's ``path`` through the network tiers (``topology.py`` places it),
the alpha-beta cost of each collective algorithm on one level (``algorithms.py``) and the one tuner that
times every candidate on arrays of message sizes and keeps the fastest (``collectives.py``). Part of the
engine: imports only ``llmsim.engine``.
"""
