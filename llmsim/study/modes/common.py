"""Pieces the three modes' rows share: constant input columns, the split's and the system's input
columns, the cost columns and the cost at the SLO."""

from __future__ import annotations

import functools

import numpy as np


def constant_column(rows: int):
    """A column of ``rows`` copies of one input value: text as a one-category categorical (no string per
    row to allocate, check, write and format), numbers and flags as numpy arrays, None as objects."""

    def column(v):
        if isinstance(v, str) and rows > 1:  # one point (estimate) stays off pandas: its import is 0.4 s
            import pandas as pd

            return pd.Categorical.from_codes(np.zeros(rows, dtype=np.int8), dtype=_category(v), validate=False)
        return np.full(rows, v, dtype=object if v is None else None)
    return column


@functools.lru_cache(maxsize=256)
def _category(value: str):
    """The one-category dtype of a text input column (built once: a sweep asks for it per group)."""
    import pandas as pd

    return pd.CategoricalDtype([value])


def system_inputs(sc, n: dict, const) -> dict:
    """Model, hardware and split input columns shared by training and inference rows."""
    return {"model": const(sc.names["model"]), "accelerator": const(sc.names["accelerator"]),
            "network": const(sc.names["network"]), "num_devices": n["num_devices"], "tp": n["tp"],
            "pp": n["pp"], "dp": n["dp"] if n.get("dp") is not None else const(None), "cp": n["cp"], "ep": n["ep"]}


def split_inputs(split, num_devices) -> dict:
    """The split's input columns of a record."""
    return {"num_devices": num_devices, "tp": split.tp, "pp": split.pp, "dp": split.dp, "cp": split.cp,
            "ep": split.ep}


def cost_columns(sc, tokens_per_s, num_devices=None) -> dict:
    """Device manufacturing cost and the system's capex, power, $/hour and $ per million tokens
    (numbers, or arrays when ``num_devices`` is an array)."""
    from llmsim.engine.cost.system import system_cost, system_cost_columns

    acc = sc.accelerator
    price = acc.list_price_usd if acc.list_price_usd is not None else acc.device_cost_usd
    price = price if price is not None else float("nan")
    tdp = acc.tdp_w if acc.tdp_w is not None else float("nan")
    if num_devices is None:
        return {"device_cost_usd": acc.device_cost_usd,
                **system_cost(sc.num_devices, price, tdp, sc.network, sc.cost, tokens_per_s)}
    device_cost = np.full(len(num_devices), acc.device_cost_usd if acc.device_cost_usd is not None else np.nan)
    return {"device_cost_usd": device_cost,
            **system_cost_columns(num_devices, price, tdp, sc.network, sc.cost, tokens_per_s)}


def with_slo_cost(cols: dict) -> dict:
    """``cols`` (a row or arrays) with, when an SLO was given, ``slo_cost_per_million_tokens_usd``: the
    system's cost per hour over the output tokens it serves at the highest load that meets the SLO (NaN
    when no load meets it)."""
    if "slo_throughput_tokens_per_s_per_device" in cols:
        rate = np.asarray(cols["slo_throughput_tokens_per_s_per_device"], dtype=float) * cols["num_devices"]
        cost = np.asarray(cols["cost_per_hour_usd"]) / (np.where(rate > 0, rate, np.nan) * 3600) * 1e6
        cols["slo_cost_per_million_tokens_usd"] = cost if np.ndim(cost) else float(cost)
    return cols
