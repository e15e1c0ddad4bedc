"""The columns of a sweep's rows: the record's of each workload mode a sweep runs (``llmsim.schema``),
and the columns of the grid keys that no record column names (used by ``sweep.expected_columns`` before
the run and by each worker's groups in ``evaluate``)."""

from __future__ import annotations

import json

from llmsim import schema
from llmsim.spec.sweep import SweepSpec


def record_columns(mode: str, slo: bool = False) -> tuple[str, ...]:
    """The columns of one ``mode`` point, as declared in ``llmsim.schema`` (``slo``: serving with a
    service-level objective, which adds the SLO columns; a sweep's serving rows are co-located)."""
    return tuple(c.name for c in schema.for_mode(mode, "colocated", "ttft_percentiles", *(("slo",) if slo else ())))


def has_slo(spec: SweepSpec) -> bool:
    """Whether some point of the sweep serves under an SLO (in its base or on an axis)."""
    serving = spec.base.get("serving")
    keys = ("slo_ttft_s", "slo_tpot_s")
    in_base = isinstance(serving, dict) and any(serving.get(k) is not None for k in keys)
    on_axis = any(path == ("serving", k) and any(v is not None for v in values)
                  for path, values in spec.axes for k in keys)
    zipped = any(path == ("serving", k) and any(row[i] is not None for row in spec.zip_rows)
                 for i, path in enumerate(spec.zip_paths) for k in keys)
    return in_base or on_axis or zipped


def record_names(spec: SweepSpec) -> list[str]:
    """``point`` and the record's columns of each workload mode the sweep runs."""
    workload = spec.base.get("workload")
    modes = {workload.get("mode", "training") if isinstance(workload, dict) else "training"}
    modes |= {v for path, values in spec.axes if path == ("workload", "mode") for v in values}
    modes |= {row[i] for i, path in enumerate(spec.zip_paths) if path == ("workload", "mode") for row in spec.zip_rows}
    names = ["point"]
    for mode in sorted(m for m in modes if m in ("training", "inference", "serving")):
        names += [c for c in record_columns(mode, mode == "serving" and has_slo(spec)) if c not in names]
    return names


def axis_paths(spec: SweepSpec) -> list[tuple[str, ...]]:
    """The grid's keys: the axes', then the zip block's."""
    return [p for p, _ in spec.axes] + list(spec.zip_paths)


def axis_column(path) -> str:
    """The output column of a grid key: its last key (``parallel.moe_gemm_kernel`` -> ``moe_gemm_kernel``),
    its last two below a section (``serving.speculative.draft_tokens`` -> ``speculative_draft_tokens``,
    ``serving.disaggregation.prefill.pp`` -> ``prefill_pp``)."""
    return "_".join(path[-2:]) if len(path) > 2 else path[-1]


def axis_columns(paths, names) -> dict[str, tuple]:
    """Column -> grid key, for the grid keys whose column (``axis_column``) is not among the record's
    columns ``names``: rows that differ only there then tell apart."""
    out: dict[str, tuple] = {}
    for path in paths:
        name = axis_column(path)
        if name not in names and name not in out:
            out[name] = path
    return out


def cell(value):
    """A grid value as a cell: a mapping or a list as JSON text."""
    return json.dumps(value, default=str) if isinstance(value, (dict, list)) else value
