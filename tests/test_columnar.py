"""Sweep rows through the columnar writer (llmsim/study/partfile.py, polars): read back as a spreadsheet
reads a CSV, every float is the same double, every other cell the same value; Parquet holds the same."""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np
import pandas as pd

from llmsim.output.sweep_writer import lines, tidy
from llmsim.study import partfile


def _frame(n: int = 5000) -> pd.DataFrame:
    rng = np.random.default_rng(21)
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    floats[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e16, 1e15, 1e-4, 1e-5, 5e-324, 0.1, 1 / 3]
    return pd.DataFrame({
        "f": floats,
        "g": rng.integers(0, 50, n) / 8,  # repeated values
        "i": rng.integers(-10**12, 10**12, n),
        "b": rng.integers(0, 2, n).astype(bool),
        "n": pd.array(np.where(rng.integers(0, 3, n) == 0, None, rng.integers(0, 9, n)), dtype="Int64"),
        "s": rng.choice(np.array(["a", "b,c", 'say "hi"', "two\nlines", "cr\r\nlf", "", None], dtype=object), n),
        "c": pd.Categorical(rng.choice(["h100-sxm", "b200"], n)),
        "o": rng.choice(np.array([True, False, None], dtype=object), n),
    })


def _cell(text: str, kind: str):
    """A CSV cell as a spreadsheet takes it: empty is missing; numbers parsed; TRUE/FALSE any case."""
    if text == "":
        return None
    if kind in "fg":
        return float(text)
    if kind in "in":
        return int(text)
    if kind in "bo":
        return {"true": True, "false": False}[text.lower()]
    return text


def test_csv_reads_back_value_for_value(tmp_path):
    frame = _frame()
    path = str(tmp_path / "part.arrow")
    partfile.write(frame, path)
    text = lines(tidy(partfile.read(path), list(frame.columns)), "csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == len(frame) and text.count("\n") == len(frame)  # line breaks in text: one row, one line
    for name, kind in zip(frame.columns, "fgibnsco", strict=True):
        got = [_cell(r[frame.columns.get_loc(name)], kind) for r in rows]
        want = frame[name].tolist()
        for g, w in zip(got, want, strict=True):
            if kind in "fg":
                if w is None or (isinstance(w, float) and math.isnan(w)):
                    assert g is None  # NaN: missing, an empty cell as before
                else:  # the same double, bit for bit (-0.0 included)
                    assert np.float64(g).tobytes() == np.float64(w).tobytes()
            elif kind == "s":
                assert g == (re.sub(r"[\r\n]+", " ", w) if isinstance(w, str) and w else None)
            else:
                assert g == (None if w is None or w is pd.NA else w)


def test_parquet_holds_the_same_values(tmp_path):
    frame = _frame(200)
    path = str(tmp_path / "part.arrow")
    partfile.write(frame, path)
    pq = tmp_path / "rows.parquet"
    partfile.read(path).write_parquet(pq)
    back = pd.read_parquet(pq)
    assert np.array_equal(back["f"].to_numpy(dtype=float), frame["f"].to_numpy(), equal_nan=True)
    assert back["c"].astype(str).tolist() == frame["c"].astype(str).tolist()
