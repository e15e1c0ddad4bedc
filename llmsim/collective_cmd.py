"""`llmsim collective`: one collective (or a sweep of sizes) on a network preset, nccl-tests style."""

from __future__ import annotations

import re

from llmsim.engine.collectives import ALGORITHMS, OPS, bus_factor, collective
from llmsim.engine.topology import path_of
from llmsim.spec.errors import SpecError

COLUMNS = ["op", "ranks", "bytes", "algorithm", "protocol", "tiers", "time_s", "algbw_gb_s", "busbw_gb_s"]
_UNITS = {"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(text: str) -> int:
    """'1GiB' -> 1073741824, '256MB' -> 256000000, '4096' -> 4096 (KiB/MiB/GiB binary; KB/MB/GB decimal)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).upper() if m else ""
    if not m or unit not in _UNITS:
        raise SpecError(f"--bytes: cannot read size {text!r}; use a number with an optional unit "
                        "B, KB, MB, GB, TB (powers of 10) or KiB, MiB, GiB, TiB (powers of 2), e.g. 1GiB")
    value = float(m.group(1)) * _UNITS[unit]
    if value < 1:
        raise SpecError(f"--bytes: size {text!r} is below one byte")
    return int(value)


def sizes(text: str) -> list[int]:
    """One size, or 'LO:HI' for every power-of-two multiple of LO up to HI."""
    if ":" not in text:
        return [parse_size(text)]
    lo_text, hi_text = text.split(":", 1)
    lo, hi = parse_size(lo_text), parse_size(hi_text)
    if hi < lo:
        raise SpecError(f"--bytes: range {text!r} ends below its start")
    out = []
    while lo <= hi:
        out.append(lo)
        lo *= 2
    return out


def rows(network, op: str, byte_sizes: list[int], ranks: int, stride: int = 1,
         algorithm: str | None = None) -> list[dict]:
    """One output row per size (column names: COLUMNS)."""
    if op not in OPS:
        raise SpecError(f"--op: unknown collective {op!r}; allowed: {', '.join(OPS)}")
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise SpecError(f"--algorithm: unknown algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    total = network.tiers[-1].size
    if ranks < 2 or ranks * stride > total:
        raise SpecError(f"--ranks: {ranks} ranks {stride} apart do not fit network '{network.name}' "
                        f"({total} devices); allowed: 2 to {total // stride}")
    path = path_of(network, stride, 2 if op == "p2p" else ranks)
    out = []
    for nbytes in byte_sizes:
        r = collective(op, nbytes, path, algorithm)
        if r.time_s == float("inf"):
            raise SpecError(f"--algorithm: {algorithm} does not apply to {op} on {path.tiers} "
                            f"({', '.join(lv.topology for lv in path.levels)})")
        algbw = nbytes / r.time_s / 1e9
        out.append({"op": op, "ranks": ranks, "bytes": nbytes, "algorithm": r.algorithm, "protocol": r.protocol,
                    "tiers": r.tiers, "time_s": r.time_s, "algbw_gb_s": algbw,
                    "busbw_gb_s": algbw * bus_factor(op, ranks)})
    return out
