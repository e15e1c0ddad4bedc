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


def test_the_spelling_a_spreadsheet_reads(tmp_path):
    # flags as true/false, a nullable integer without a decimal point, an empty text as an empty cell,
    # a missing float as an empty cell (hand-written expected line)
    frame = pd.DataFrame({"b": [True, False], "n": pd.array([8, None], dtype="Int64"), "s": ["", "x"],
                          "f": [0.5, np.nan], "o": np.array([True, None], dtype=object)})
    path = str(tmp_path / "part.arrow")
    partfile.write(frame, path)
    assert lines(tidy(partfile.read(path), list(frame.columns)), "csv") == "true,8,,0.5,true\nfalse,,x,,\n"


def test_integer_columns_stay_integers_through_missing_cells(tmp_path):
    # tidy writes the schema's integer columns without a decimal point where infeasible rows leave a gap
    import polars as pl

    frame = pl.DataFrame({"tp": [8.0, None, 2.0], "input_len": [1024.5, 2.0, None]})
    out = tidy(frame, ["tp", "input_len", "pp"])
    assert lines(out, "csv") == "8,1024.5,\n,2.0,\n2,,\n"  # a fractional mean length stays a float
    big = pd.DataFrame({"n": pd.array([2**53 + 1, None], dtype="Int64")})
    path = str(tmp_path / "big.arrow")
    partfile.write(big, path)
    assert partfile.read(path)["n"].to_list() == [2**53 + 1, None]  # no float on the way


def test_a_kept_refused_row_reads_back_typed(tmp_path):
    # keep: all with batch_size max: tp 1 leaves Llama 3 70B no room for one sequence on an H100 (141 GB of
    # bf16 weights), so that row is refused; JSON lines keep numbers numbers and flags flags
    import json

    from conftest import run_main

    spec = tmp_path / "s.yaml"
    spec.write_text("base:\n  model: llama3-70b\n  system: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}\n"
                    "  parallel: {tp: 8, pp: 1}\n  workload: {mode: inference, precision: bf16, batch_size: max,"
                    " input_len: 1024, output_len: 128}\ngrid:\n  parallel.tp: [1, 8]\nkeep: all\n")
    out = tmp_path / "rows.jsonl"
    code, _, err = run_main("sweep", str(spec), "-o", str(out), "--quiet")
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    refused = [r for r in rows if r["infeasible_reason"]]
    served = [r for r in rows if not r["infeasible_reason"]]
    assert len(refused) == 1 and len(served) == 1
    assert refused[0]["batch_size"] is None and type(served[0]["batch_size"]) is int and served[0]["batch_size"] > 0
    assert served[0]["fits_in_memory"] is True and type(served[0]["tp"]) is int
