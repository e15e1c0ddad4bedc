"""`llmsim collective`: one collective (or a sweep of sizes) on a network preset, nccl-tests style."""

from __future__ import annotations

import re

import typer

from llmsim.cli.common import Format, registry
from llmsim.spec.errors import SpecError

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


def collective_cmd(
    ctx: typer.Context,
    network: str = typer.Option("dgx-h100", "--network", help="Network preset name."),
    op: str = typer.Option("all_reduce", "--op",
                           help="all_reduce, reduce_scatter, all_gather, all_to_all, broadcast or p2p."),
    nbytes: str = typer.Option("1GiB", "--bytes", metavar="SIZE|LO:HI",
                               help="Buffer size as nccl-tests counts it (1GiB, 256MB, 4096); LO:HI sweeps "
                                    "powers of two."),
    ranks: int = typer.Option(8, "--ranks", help="Ranks in the group."),
    stride: int = typer.Option(1, "--stride", help="Devices between consecutive ranks (8 = one per node)."),
    algorithm: str | None = typer.Option(None, "--algorithm",
                                         help="Force one: ring, tree, halving-doubling, bruck, pairwise, "
                                              "direct, torus, in-network, hierarchical."),
    fmt: Format = typer.Option(Format.table, "--format", help="table, csv or json."),
) -> None:
    """Time one collective on a network: time, algbw and busbw as nccl-tests defines them (GB = 1e9 B)."""
    from llmsim.output.writers import emit
    from llmsim.spec.convert import network_values
    from llmsim.study import collective as cc

    net = network_values(registry(ctx).get("networks", network))
    out = cc.rows(net, op.replace("-", "_"), sizes(nbytes), ranks, stride, algorithm)
    if fmt is not Format.table:
        emit(out, fmt.value, cc.COLUMNS)
        return
    shown = [{**r, "bytes": _size_text(r["bytes"]), "time_s": f"{r['time_s'] * 1e6:,.1f}",
              "algbw_gb_s": f"{r['algbw_gb_s']:.1f}", "busbw_gb_s": f"{r['busbw_gb_s']:.1f}"} for r in out]
    heads = {"time_s": "time (us)", "algbw_gb_s": "algbw (GB/s)", "busbw_gb_s": "busbw (GB/s)"}
    emit(shown, "table", cc.COLUMNS, title=f"{op} on {network}, {ranks} ranks", headers=heads)


def _size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
