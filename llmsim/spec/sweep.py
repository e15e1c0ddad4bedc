"""The sweep spec (README, "Sweep a design space"): ``base`` (a scenario mapping, or the path of a scenario
file), ``grid`` (dotted path -> list, range ``{from, to, mul}`` / ``{from, to, step}``, or ``auto`` for a
parallel degree), ``zip`` (dotted path -> lists of equal length, varied together), ``constraints``
(expressions over output columns), ``objectives`` (``- maximize: col`` / ``- minimize: col``),
``keep: feasible | all``, ``compare: COLUMN``. ``load_sweep`` checks a file and returns a ``SweepSpec``,
whose point i is decoded from its index (mixed radix over the axes), so that each worker expands its own
index range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsim.spec.base import MAX_DEVICES
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


MAX_AXIS = 1_000_000  # values of one grid axis
MAX_POINTS = 10**11  # design points of a sweep, even with --yes


def _finite(x) -> bool:
    """A number within +-1e18 (NaN is not; a 400-digit integer is compared exactly, never made a float)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) <= 1e18


def _number(doc: Document, loc: tuple, raw, what: str) -> float:
    if not _finite(raw):
        raise _err(doc, loc, f"{what} must be a finite number, got {raw!r:.40}")
    return raw


def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n`` in increasing order (sqrt(n) trial divisions)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(small + [n // d for d in reversed(small) if d * d != n])


def _values(doc: Document, loc: tuple, raw, max_devices: int) -> tuple:
    """An axis's values; a range is sized before it is expanded (at most ``MAX_AXIS`` values)."""
    path = loc[-1]
    if raw == "auto":
        if path not in PARALLEL_DEGREES:
            raise _err(doc, loc, f"auto is only allowed for {', '.join(sorted(PARALLEL_DEGREES))}")
        return divisors(max_devices)
    if isinstance(raw, dict):
        keys = set(raw)
        if keys not in ({"from", "to", "mul"}, {"from", "to", "step"}):
            raise _err(doc, loc, "a range is {from, to, mul} or {from, to, step}")
        lo, hi = _number(doc, loc, raw["from"], "from"), _number(doc, loc, raw["to"], "to")
        if "mul" in raw:
            mul = _number(doc, loc, raw["mul"], "mul")
            if not (mul > 1 and lo > 0):
                raise _err(doc, loc, "mul must be > 1 and from > 0")
            n = math.floor(math.log(hi / lo) / math.log(mul)) + 2 if hi >= lo else 0  # one above: rounding
            if n > MAX_AXIS + 1:
                raise _err(doc, loc, f"the range has about {n:,} values; at most {MAX_AXIS:,} per axis")
            out, v = [], lo
            while v <= hi * (1 + 1e-12) and len(out) <= MAX_AXIS:
                out.append(v)
                v = v * mul
            return tuple(out)
        step = _number(doc, loc, raw["step"], "step")
        if not step > 0:
            raise _err(doc, loc, "step must be > 0")
        n = math.floor((hi - lo) / step + 1e-9) + 1
        if n > MAX_AXIS:
            raise _err(doc, loc, f"the range has {n:,} values; at most {MAX_AXIS:,} per axis")
        return tuple(lo + k * step for k in range(max(n, 0)))
    if isinstance(raw, list) and raw:
        if len(raw) > MAX_AXIS:
            raise _err(doc, loc, f"{len(raw):,} values; at most {MAX_AXIS:,} per axis")
        return tuple(raw)
    raise _err(doc, loc, "expected a non-empty list, a range {from, to, mul|step}, or auto")


def _key(doc: Document, loc: tuple, key) -> tuple[str, ...]:
    """A dotted scenario path of ``grid`` or ``zip``, checked against the scenario schema."""
    from llmsim.spec.scenario import ScenarioSpec
    from llmsim.spec.validation import key_error

    if not isinstance(key, str) or not key.strip():
        raise _err(doc, loc[:-1], f"keys are dotted scenario paths such as parallel.tp, got {key!r:.40}")
    parts = tuple(p.strip() for p in key.split("."))
    problem = key_error(ScenarioSpec, parts)
    if problem:
        raise _err(doc, loc, problem)
    return parts


def _list(doc: Document, d: dict, key: str, what: str) -> list:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _err(doc, (key,), f"{key} is a list of {what}, got {type(value).__name__}")
    return value


def load_sweep(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec: every key, range and expression is checked and the sweep sized before
    any point is evaluated."""
    doc = load_yaml(path)
    d = doc.data
    if not isinstance(d, dict):
        raise _err(doc, (), f"a sweep spec is a mapping with keys {', '.join(sorted(SPEC_KEYS))}")
    unknown = [k for k in d if k not in SPEC_KEYS]
    if unknown:
        key = str(unknown[0])
        raise _err(doc, (key,), f"unknown key {key!r}; allowed: {', '.join(sorted(SPEC_KEYS))}")
    base = d.get("base")
    if isinstance(base, str):
        base_path = (Path(doc.source).parent / base) if not Path(base).is_absolute() else Path(base)
        base = load_yaml(base_path).data
    if not isinstance(base, dict):
        raise _err(doc, ("base",), "base must be a scenario mapping or the path of a scenario file")
    grid = d.get("grid") or {}
    if not isinstance(grid, dict):
        raise _err(doc, ("grid",), "grid maps dotted paths to lists of values")
    paths = {k: _key(doc, ("grid", k), k) for k in grid}
    system = base.get("system")
    devices = [system.get("num_devices", 1) if isinstance(system, dict) else 1]
    devices += list(_values(doc, ("grid", "system.num_devices"), grid["system.num_devices"], 1)
                    if "system.num_devices" in grid else [])
    devices = [int(x) for x in devices if _finite(x) and x >= 1]
    max_dev = max(devices, default=1)
    if max_dev > MAX_DEVICES:
        raise _err(doc, ("grid",), f"num_devices {max_dev:,} is out of range; at most {MAX_DEVICES:,}")
    axes = tuple((paths[k], _values(doc, ("grid", k), v, max_dev)) for k, v in grid.items())
    zp = d.get("zip") or {}
    if not isinstance(zp, dict) or any(not isinstance(v, list) for v in zp.values()):
        raise _err(doc, ("zip",), "zip maps dotted paths to lists of equal length")
    zip_paths = tuple(_key(doc, ("zip", k), k) for k in zp)
    lengths = {len(v) for v in zp.values()}
    if len(lengths) > 1:
        raise _err(doc, ("zip",), f"zip lists must have equal lengths, got {sorted(lengths)}")
    zip_rows = tuple(zip(*zp.values(), strict=True)) if zp else ()
    constraints = _list(doc, d, "constraints", "expressions, e.g. - tp * pp <= 64")
    for i, c in enumerate(constraints):
        if not isinstance(c, (str, int, float)) or isinstance(c, bool):
            raise _err(doc, ("constraints", i), f"a constraint is an expression, got {type(c).__name__}")
        try:
            Expr(str(c))
        except ValueError as err:
            raise _err(doc, ("constraints", i), str(err)) from None
    objectives = []
    for i, o in enumerate(_list(doc, d, "objectives", "{maximize: COLUMN} or {minimize: COLUMN}")):
        if not (isinstance(o, dict) and len(o) == 1 and next(iter(o)) in ("maximize", "minimize")
                and isinstance(next(iter(o.values())), str)):
            raise _err(doc, ("objectives", i), "each objective is {maximize: COLUMN} or {minimize: COLUMN}")
        (sense, col), = o.items()
        objectives.append((str(col), sense == "maximize"))
    if len(objectives) > 4:
        raise _err(doc, ("objectives",), "1 to 4 objectives")
    keep = d.get("keep", "feasible")
    if keep not in ("feasible", "all"):
        raise _err(doc, ("keep",), f"keep must be feasible or all, got {keep!r:.40}")
    compare = d.get("compare")
    if compare is not None and not isinstance(compare, str):
        raise _err(doc, ("compare",), "compare names one output column, e.g. compare: tokens_per_s")
    spec = SweepSpec(doc.source, base, axes, zip_paths, zip_rows, tuple(str(c) for c in constraints),
                     tuple(objectives), keep, compare)
    if spec.size > MAX_POINTS:
        raise _err(doc, ("grid",), f"{spec.size:.3g} design points; at most {MAX_POINTS:,}")
    return spec
