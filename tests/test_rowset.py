"""A chunk's rows as numpy columns (llmsim/study/rowset.py) must read as the pandas frames they replace:
``concat`` as ``pandas.concat(ignore_index=True)``, scalars as pandas broadcasts them, missing cells as
``pandas.isna``."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsim.study import rowset

# a column's piece in one group: numbers, flags, text with None, a one-category text column (the input
# columns modes/common.constant_column makes), each of 1-4 rows
KINDS = ("int", "float", "bool", "text", "category")


def _piece(kind: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "int":
        return rng.integers(0, 9, n)
    if kind == "float":
        return np.where(rng.random(n) < 0.3, np.nan, rng.random(n))
    if kind == "bool":
        return rng.random(n) < 0.5
    if kind == "text":
        return np.array([None if rng.random() < 0.3 else f"t{rng.integers(3)}" for _ in range(n)], dtype=object)
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), dtype=pd.CategoricalDtype([f"c{seed % 2}"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(KINDS), min_size=2, max_size=2), st.integers(1, 4),
                          st.integers(0, 3), st.booleans()), min_size=1, max_size=4))
def test_concat_reads_as_pandas_concat(groups):
    # each group: the kinds of columns a and b, its rows, a seed, and whether it has column c too
    parts = [{"a": _piece(ka, n, seed), "b": _piece(kb, n, seed + 1), **({"c": _piece("int", n, seed)} if c else {})}
             for (ka, kb), n, seed, c in groups]
    got = rowset.to_pandas(rowset.concat(parts))
    want = pd.concat([rowset.to_pandas(p) for p in parts], ignore_index=True)
    assert list(got.columns) == list(want.columns)
    for name in want.columns:
        if isinstance(want[name].dtype, np.dtype) and want[name].dtype.kind in "biuf":  # numbers: their type too
            pd.testing.assert_series_equal(got[name], want[name])
        else:  # text: the same cells (pandas 3 may type joined categoricals as str, this as objects)
            assert [None if pd.isna(v) else v for v in got[name]] == [None if pd.isna(v) else v for v in want[name]]


def test_broadcast_types_a_scalar_as_pandas_does():
    # pandas: frame["x"] = 3 -> int64, 2.5 -> float64, True -> bool; text and None as objects (the
    # object column the part file has always been written from; pandas 3 would type text as str)
    frame = pd.DataFrame({"p": [1, 2]})
    for value in (3, 2.5, True, np.float64(1.5)):
        frame["x"] = value
        assert rowset.broadcast(value, 2).dtype == frame["x"].dtype, value
    for value in ("llama3-70b", None):
        assert rowset.broadcast(value, 2).dtype == object and rowset.broadcast(value, 2).tolist() == [value] * 2


def test_in_point_order_and_missing():
    rows = {"point": np.array([5, 2, 9]), "r": np.array([None, "too big", float("nan")], dtype=object),
            "f": np.array([1.0, np.nan, 3.0])}
    ordered = rowset.in_point_order(rows)
    assert ordered["point"].tolist() == [2, 5, 9] and ordered["f"][1] == 1.0
    assert rowset.missing(rows["r"]).tolist() == [True, False, True]
    assert rowset.missing(rows["f"]).tolist() == [False, True, False]
    assert np.isnan(rowset.numeric({"point": rows["point"], "r": rows["r"]}, "r")).all()
