"""Stragglers and goodput of a synchronous training job at scale.

Stragglers: identical devices do not run at the same speed (manufacturing spread and power management:
Sinha et al., "Not All GPUs Are Created Equal", SC22, arXiv 2208.11035), and a synchronous step waits for
the slowest of its ``N`` devices. With per-device speeds spread by a coefficient of variation ``cv``, the
step's compute stretches by cv * E[max of N standard normals], E taken by Blom's approximation
Phi^-1((N - 0.375) / (N + 0.25)) (Blom 1958; within 1% of the exact expectation for N >= 8, 4% high at 2).

Goodput: a job of ``N`` devices fails every M = 1 / (N * lambda) hours on average; it checkpoints its
training state every tau seconds, each checkpoint pausing it for C seconds, and after a failure it restarts
(R seconds) and redoes on average half an interval. Young's optimal interval tau = sqrt(2 C M) (Young 1974,
CACM 17(9)) gives the useful fraction tau / (tau + C) * (1 - (R + (tau + C) / 2) / M); with no failures it
is 1 (no checkpoints needed).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from llmsim.engine.columns import per_key
from llmsim.engine.types import Reliability

_NORMAL = NormalDist()


def expected_max_normal(n):
    """E[max of n independent standard normals] (Blom's approximation; 0 for n = 1)."""
    def one(k):
        return (_NORMAL.inv_cdf((k - 0.375) / (k + 0.25)) if k > 1 else 0.0,)
    return per_key(lambda k: one(float(k)), np.asarray(n))[0] if np.ndim(n) else one(float(n))[0]


def straggler_time(compute_s, devices, r: Reliability):
    """Seconds a step's compute ``compute_s`` stretches waiting for the slowest of ``devices``."""
    return compute_s * r.device_speed_cv * expected_max_normal(devices)


def goodput(devices, state_bytes_per_device, r: Reliability) -> dict:
    """Checkpoint time (s), Young's interval (s) and the fraction of wall time that is useful training
    for a job of ``devices`` writing ``state_bytes_per_device`` per checkpoint (arrays or numbers)."""
    devices = np.asarray(devices, dtype=float)
    ckpt = state_bytes_per_device / r.checkpoint_write_bytes_per_s_per_device
    rate = devices * r.failures_per_device_hour / 3600.0  # failures per second of the job
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mtbf = np.where(rate > 0, 1.0 / rate, np.inf)
        interval = np.sqrt(2.0 * ckpt * mtbf)
        # failures so rare that the time between them overflows: nothing is lost
        useful = np.where(np.isfinite(interval), interval / (interval + ckpt)
                          * np.clip(1.0 - (r.restart_s + (interval + ckpt) / 2.0) / mtbf, 0.0, 1.0), 1.0)
    return {"checkpoint_time_s": ckpt, "checkpoint_interval_s": interval, "goodput_fraction": useful}
