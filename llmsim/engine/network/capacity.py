"""How many devices a network holds: its largest tier's size. One rule for a scenario's check and a sweep's rows."""

from __future__ import annotations

import numpy as np


def too_many_devices(network_name: str, largest: int, num_devices) -> np.ndarray:
    """For each of ``num_devices`` (a number or an array), why a system of that many devices does not
    fit the network ``network_name`` whose largest tier holds ``largest`` devices, or None where it fits
    (the reasons written only for the rows that need one)."""
    devices = np.atleast_1d(np.asarray(num_devices))
    out = np.full(devices.shape, None, dtype=object)
    big = devices > largest
    out[big] = [f"num_devices ({d}) exceeds the largest tier of network '{network_name}' ({largest} devices)"
                for d in devices[big].tolist()]
    return out
