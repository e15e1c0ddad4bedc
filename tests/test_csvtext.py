"""The fast CSV lines of a sweep frame are pandas' bytes: floats at every magnitude, -0.0, inf, NaN,
integers, booleans, nullable integers, text with commas, quotes and line breaks, missing values."""

from __future__ import annotations

import numpy as np
import pandas as pd

from llmsim.output import csvtext
from llmsim.output.sweep_writer import lines


def _pandas(frame: pd.DataFrame) -> str:
    text = [c for c in frame if frame[c].dtype.kind not in "biufcmM"]
    frame = frame.assign(**{c: frame[c].replace(r"[\r\n]+", " ", regex=True) for c in text})
    return frame.to_csv(index=False, header=False, lineterminator="\n")


def test_same_bytes_as_pandas():
    rng = np.random.default_rng(21)
    n = 5000
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    floats[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e16, 1e15, 1e-4, 1e-5, 5e-324, 0.1, 1 / 3]
    frame = pd.DataFrame({
        "f": floats,
        "g": rng.integers(0, 50, n) / 8,  # repeated values
        "i": rng.integers(-10**12, 10**12, n),
        "b": rng.integers(0, 2, n).astype(bool),
        "n": pd.array(np.where(rng.integers(0, 3, n) == 0, None, rng.integers(0, 9, n)), dtype="Int64"),
        "s": rng.choice(np.array(["a", "b,c", 'say "hi"', "two\nlines", "cr\r\nlf", "", None], dtype=object), n),
        "o": rng.choice(np.array([True, False, None, 3], dtype=object), n),
    })
    fast = csvtext.lines(frame)
    assert fast is not None
    assert fast == _pandas(frame)
    assert lines(frame, "csv") == _pandas(frame)


def test_other_kinds_fall_back_to_pandas():
    odd = pd.DataFrame({"x": [0.5, 1.5], "y": np.array([1.5, "a"], dtype=object)})
    assert csvtext.lines(odd) is None
    assert lines(odd, "csv") == _pandas(odd)
    one = pd.DataFrame({"x": ["", "a"]})  # one column: the csv module quotes an empty row
    assert csvtext.lines(one) is None
    assert lines(one, "csv") == _pandas(one)
