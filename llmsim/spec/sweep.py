"""The sweep spec (DESIGN.md, "Sweep spec"): ``base`` (a scenario mapping, or the path of a scenario file),
``grid`` (dotted path -> list, range ``{from, to, mul}`` / ``{from, to, step}``, or ``auto`` for a parallel
degree), ``zip`` (dotted path -> lists of equal length, varied together), ``constraints`` (expressions over
output columns), ``objectives`` (``- maximize: col`` / ``- minimize: col``), ``keep: feasible | all``,
``compare: COLUMN``. ``load_sweep`` checks a file and returns a ``SweepSpec``, whose point i is decoded
from its index (mixed radix over the axes), so that each worker expands its own index range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsim.spec.errors import SpecError
from llmsim.spec.expr import Expr
from llmsim.spec.yamlio import Document, load_yaml

PARALLEL_DEGREES = {"parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp", "parallel.ep"}
SPEC_KEYS = {"base", "grid", "zip", "constraints", "objectives", "keep", "compare"}


@dataclass(frozen=True)
class SweepSpec:
    source: str
    base: dict
    axes: tuple[tuple[tuple[str, ...], tuple], ...]  # cartesian axes: (dotted path, values)
    zip_paths: tuple[tuple[str, ...], ...]
    zip_rows: tuple[tuple, ...]
    constraints: tuple[str, ...]
    objectives: tuple[tuple[str, bool], ...]  # (column, maximize)
    keep: str = "feasible"
    compare: str | None = None

    @property
    def size(self) -> int:
        return math.prod(len(v) for _, v in self.axes) * max(len(self.zip_rows), 1)

    def point(self, i: int) -> list[tuple[tuple[str, ...], Any]]:
        """The overrides of point ``i`` (the last axis varies fastest, zip rows slowest)."""
        out = []
        for path, values in reversed(self.axes):
            i, j = divmod(i, len(values))
            out.append((path, values[j]))
        if self.zip_rows:
            out += list(zip(self.zip_paths, self.zip_rows[i], strict=True))
        return out[::-1]


def _err(doc: Document, loc: tuple, msg: str) -> SpecError:
    return SpecError(msg, file=doc.source, line=doc.line_of(loc), path=".".join(map(str, loc)) or None)


def _values(doc: Document, loc: tuple, raw, max_devices: int) -> tuple:
    path = loc[-1]
    if raw == "auto":
        if path not in PARALLEL_DEGREES:
            raise _err(doc, loc, f"auto is only allowed for {', '.join(sorted(PARALLEL_DEGREES))}")
        return tuple(d for d in range(1, max_devices + 1) if max_devices % d == 0)
    if isinstance(raw, dict):
        keys = set(raw)
        if keys not in ({"from", "to", "mul"}, {"from", "to", "step"}):
            raise _err(doc, loc, "a range is {from, to, mul} or {from, to, step}")
        lo, hi = raw["from"], raw["to"]
        if "mul" in raw:
            if not (isinstance(raw["mul"], (int, float)) and raw["mul"] > 1 and lo > 0):
                raise _err(doc, loc, "mul must be > 1 and from > 0")
            out, v = [], lo
            while v <= hi * (1 + 1e-12):
                out.append(v)
                v = v * raw["mul"]
            return tuple(out)
        if not (isinstance(raw["step"], (int, float)) and raw["step"] > 0):
            raise _err(doc, loc, "step must be > 0")
        n = math.floor((hi - lo) / raw["step"] + 1e-9) + 1
        return tuple(lo + k * raw["step"] for k in range(max(n, 0)))
    if isinstance(raw, list) and raw:
        return tuple(raw)
    raise _err(doc, loc, "expected a non-empty list, a range {from, to, mul|step}, or auto")


def load_sweep(path: str | Path) -> SweepSpec:
    doc = load_yaml(path)
    d = doc.data
    if not isinstance(d, dict):
        raise _err(doc, (), f"a sweep spec is a mapping with keys {', '.join(sorted(SPEC_KEYS))}")
    unknown = set(d) - SPEC_KEYS
    if unknown:
        key = min(unknown)
        raise _err(doc, (key,), f"unknown key {key!r}; allowed: {', '.join(sorted(SPEC_KEYS))}")
    base = d.get("base")
    if isinstance(base, str):
        base_path = (Path(path).parent / base) if not Path(base).is_absolute() else Path(base)
        base = load_yaml(base_path).data
    if not isinstance(base, dict):
        raise _err(doc, ("base",), "base must be a scenario mapping or the path of a scenario file")
    grid = d.get("grid") or {}
    if not isinstance(grid, dict):
        raise _err(doc, ("grid",), "grid maps dotted paths to lists of values")
    devices = [base.get("system", {}).get("num_devices", 1)]
    devices += list(_values(doc, ("grid", "system.num_devices"), grid["system.num_devices"], 1)
                    if "system.num_devices" in grid else [])
    max_dev = max(int(x) for x in devices if isinstance(x, (int, float)))
    axes = tuple((tuple(k.split(".")), _values(doc, ("grid", k), v, max_dev)) for k, v in grid.items())
    zp = d.get("zip") or {}
    if not isinstance(zp, dict) or any(not isinstance(v, list) for v in zp.values()):
        raise _err(doc, ("zip",), "zip maps dotted paths to lists of equal length")
    lengths = {len(v) for v in zp.values()}
    if len(lengths) > 1:
        raise _err(doc, ("zip",), f"zip lists must have equal lengths, got {sorted(lengths)}")
    zip_rows = tuple(zip(*zp.values(), strict=True)) if zp else ()
    constraints = d.get("constraints") or []
    for i, c in enumerate(constraints):
        try:
            Expr(str(c))
        except ValueError as err:
            raise _err(doc, ("constraints", i), str(err)) from None
    objectives = []
    for i, o in enumerate(d.get("objectives") or []):
        if not (isinstance(o, dict) and len(o) == 1 and next(iter(o)) in ("maximize", "minimize")):
            raise _err(doc, ("objectives", i), "each objective is {maximize: COLUMN} or {minimize: COLUMN}")
        (sense, col), = o.items()
        objectives.append((str(col), sense == "maximize"))
    if len(objectives) > 4:
        raise _err(doc, ("objectives",), "1 to 4 objectives")
    keep = d.get("keep", "feasible")
    if keep not in ("feasible", "all"):
        raise _err(doc, ("keep",), f"keep must be feasible or all, got {keep!r}")
    compare = d.get("compare")
    if compare is not None and not isinstance(compare, str):
        raise _err(doc, ("compare",), "compare names one output column, e.g. compare: tokens_per_s")
    return SweepSpec(doc.source, base, axes, tuple(tuple(k.split(".")) for k in zp), zip_rows,
                     tuple(str(c) for c in constraints), tuple(objectives), keep, compare)
