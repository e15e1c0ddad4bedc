"""Collective cost on a group's path through the network, with the algorithm a tuner would pick
(``tuner.py``, the one tuner: every applicable algorithm under each protocol, the fastest kept, as NCCL's
tuner does).
Sizes follow nccl-tests (doc/PERFORMANCE.md); see ``algorithms.py`` for the closed forms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmsim.engine import calibration as cal
from llmsim.engine.network import tuner
from llmsim.engine.network.path import Path
from llmsim.engine.network.tuner import ALGORITHMS, AUTO, NO_CANDIDATE  # noqa: F401 - the module's names

OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "p2p")


@dataclass(frozen=True)
class Result:
    time_s: float
    algorithm: str
    protocol: str
    tiers: str


NONE = Result(0.0, "-", "-", "-")


def tune(op: str, sizes: np.ndarray, path: Path, algorithm: str | None = None) -> tuple[np.ndarray, np.ndarray, tuple]:
    """The tuner (``tuner.tune_pairs``: every candidate, or only ``algorithm``, the fastest kept) on one
    path for every size: (times without the launch cost, the index of each size's choice, the candidates +
    NO_CANDIDATE), inf and NO_CANDIDATE where none applies. ``sizes`` > 0, ``path.ranks`` > 1; each distinct
    size is tuned (or remembered) once."""
    sizes = np.asarray(sizes, dtype=float)
    uniq, back = np.unique(sizes, return_inverse=True)
    t, choice, cands = tuner.tune_pairs(op, uniq, np.zeros(len(uniq), dtype=np.int64), [path], algorithm)
    return t[back].reshape(sizes.shape), choice[back].reshape(sizes.shape), cands


@dataclass(frozen=True)
class Timed:
    """One collective on one path for an array of sizes."""

    times: np.ndarray  # seconds, launch cost included; 0 where nothing is sent or the group has one rank
    choice: np.ndarray  # index into ``candidates`` of each size's algorithm
    candidates: tuple[tuple[str, str], ...]  # (algorithm, protocol)
    sent: np.ndarray  # bool: a message was sent
    tiers: str  # the tiers it crosses

    @property
    def algorithms(self) -> np.ndarray:
        return np.array([a for a, _ in self.candidates], dtype=object)[self.choice]

    @property
    def protocols(self) -> np.ndarray:
        return np.array([p for _, p in self.candidates], dtype=object)[self.choice]

    def names(self, op: str) -> np.ndarray:
        """"OP ALGORITHM/PROTOCOL on TIERS" per size, None where nothing is sent (formatted once per
        candidate, not once per size)."""
        labels = np.array([f"{op} {a}/{p} on {self.tiers}" for a, p in self.candidates] + [None], dtype=object)
        return labels[np.where(self.sent, self.choice, len(self.candidates))]


def collective_columns(op: str, nbytes, path: Path, algorithm: str | None = None) -> Timed:
    """``op`` over ``path`` for each size in ``nbytes`` (a number or an array): the fastest algorithm (or
    ``algorithm``) with the library's fixed launch cost; p2p is one message over the outermost level."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    S = np.atleast_1d(np.asarray(nbytes, dtype=float))
    times, choice = np.zeros(S.shape), np.zeros(S.shape, dtype=np.int64)
    send = (S > 0) & (path.ranks > 1)
    if not send.any():
        return Timed(times, choice, (NO_CANDIDATE,), send, "-")
    if op == "p2p":
        lv = path.levels[-1]
        times[send] = lv.latency_s + S[send] / lv.bw_bytes_per_s
        return Timed(times, np.where(send, 0, 1), (("send-recv", "simple"), NO_CANDIDATE), send, lv.tier)
    t, picked, cands = tune(op, S[send], path, algorithm)
    times[send] = t + cal.COLLECTIVE_BASE_LATENCY_S
    choice[:] = len(cands) - 1
    choice[send] = picked
    return Timed(times, choice, cands, send, path.tiers)


def collective(op: str, nbytes: float, path: Path, algorithm: str | None = None) -> Result:
    """``collective_columns`` of one size."""
    c = collective_columns(op, nbytes, path, algorithm)
    if not c.sent[0]:
        return NONE
    return Result(float(c.times[0]), c.algorithms[0], c.protocols[0], c.tiers)


def collective_time(op: str, nbytes: float, n: int, path: Path) -> float:
    """Time of ``op`` over the first ``n`` ranks of ``path``."""
    if n <= 1:
        return 0.0
    return collective(op, nbytes, path.resized(n)).time_s


def bus_factor(op: str, n: int) -> float:
    """nccl-tests busbw / algbw (doc/PERFORMANCE.md)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("reduce_scatter", "all_gather", "all_to_all"):
        return (n - 1) / n
    return 1.0
