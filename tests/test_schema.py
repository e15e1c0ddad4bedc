"""The output contract (llmsim/schema.py): what the engine writes is what is declared, and the docs say it."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmsim import schema

DOCS = Path(__file__).resolve().parent.parent / "docs" / "columns.md"


def _llmsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmsim", *args], capture_output=True, text=True, check=False)


def test_docs_columns_md_is_generated_from_the_schema():
    # regenerate with: llmsim columns --format markdown > docs/columns.md
    assert DOCS.read_text(encoding="utf-8") == schema.markdown()


def test_columns_csv_lists_every_column_with_unit_and_meaning():
    out = _llmsim("columns", "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [r["name"] for r in rows] == [c.name for c in schema.COLUMNS]
    assert all(r["meaning"] and "unit" in r for r in rows)
    # a physical quantity carries its unit
    by = {r["name"]: r for r in rows}
    assert (by["step_time_s"]["unit"], by["memory_per_device_gb"]["unit"], by["energy_per_token_j"]["unit"]) == \
        ("s", "GB", "J")
    inference = _llmsim("columns", "--mode", "inference", "--format", "json")
    names = [r["name"] for r in json.loads(inference.stdout)]
    assert "ttft_s" in names and "step_time_s" not in names


def test_names_are_unique_and_directions_only_on_numbers():
    names = [c.name for c in schema.COLUMNS]
    assert len(names) == len(set(names))
    assert all(c.kind in schema.KINDS and c.when in schema.WHEN and set(c.modes) <= set(schema.MODES)
               for c in schema.COLUMNS)
    assert all(c.kind in ("int", "float") for c in schema.COLUMNS if c.better)


def test_directions_as_a_user_reads_them():
    assert schema.maximize("tokens_per_s") and schema.maximize("mfu") and schema.maximize("goodput_fraction")
    assert schema.maximize("cost_per_million_tokens_usd") is False and schema.maximize("ttft_s") is False
    assert schema.maximize("tp") is None and schema.maximize("moe_gemm_kernel") is None  # inputs, a grid key
    assert schema.maximize("tokens_per_s_vs_first") is True  # a compare column: as its base column


def test_an_undeclared_column_is_an_error():
    with pytest.raises(KeyError, match="not declared"):
        schema.order({"step_time_s": 1.0, "step_time_ms": 1000.0})


SCENARIOS = {  # mode, the conditional groups expected, flags
    "training": ("training", (), []),
    "inference": ("inference", (), ["--mode", "inference", "--batch-size", "4", "--input-len", "256",
                                    "--output-len", "32"]),
    "serving-slo": ("serving", ("slo",), ["--mode", "serving", "--concurrency", "8", "--input-len", "256",
                                          "--output-len", "32", "--set", "serving.slo_tpot_s=0.05"]),
    "serving-rate": ("serving", ("open_loop",), ["--mode", "serving", "--request-rate", "1", "--input-len",
                                                 "256", "--output-len", "32"]),
}


@pytest.mark.parametrize("case", SCENARIOS)
def test_an_estimate_writes_exactly_the_declared_columns_in_order(case):
    mode, whens, flags = SCENARIOS[case]
    out = _llmsim("estimate", *flags, "--format", "json")
    assert out.returncode == 0, out.stderr
    written = list(json.loads(out.stdout))
    assert written == [c.name for c in schema.for_mode(mode, *whens)]


def test_disaggregated_serving_writes_declared_columns():
    out = _llmsim("estimate", "--mode", "serving", "--model", "llama3-8b", "--devices", "4", "--tp", "1", "--pp", "1",
                  "--input-len", "512", "--output-len", "64", "--concurrency", "16",
                  "--set", "serving.slo_tpot_s=0.05", "--set", "serving.disaggregation={prefill: {tp: 1}, decode: {tp: 1}}",
                  "--format", "json")
    assert out.returncode == 0, out.stderr
    written = list(json.loads(out.stdout))
    declared = [c.name for c in schema.COLUMNS if c.name in written]
    assert written == declared
    assert {"prefill_devices", "kv_transfer_time_s", "colocated_slo_throughput_tokens_per_s_per_device"} <= set(written)


def test_the_estimate_tables_show_declared_columns():
    from llmsim.output import tables

    shown = [key for rows in (tables.TIME_ROWS, tables.MEMORY_ROWS, tables.INFERENCE_TIME_ROWS, tables.DECODE_ROWS,
                              tables.INFERENCE_MEMORY_ROWS) for _, key in rows]
    assert shown and all(schema.get(key) for key in shown)
