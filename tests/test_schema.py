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


LENGTHS = ["workload.input_len=256", "workload.output_len=32"]
SCENARIOS = {  # mode, the conditional groups expected, overrides
    "training": ("training", (), []),
    "inference": ("inference", (), ["workload.mode=inference", "workload.batch_size=4", *LENGTHS]),
    "serving-slo": ("serving", ("slo", "colocated", "ttft_percentiles"), ["workload.mode=serving", "workload.concurrency=8", *LENGTHS,
                                          "serving.slo_tpot_s=0.05"]),
    "serving-rate": ("serving", ("open_loop", "colocated", "ttft_percentiles"), ["workload.mode=serving", "workload.request_rate_per_s=1", *LENGTHS]),
}


def _record(overrides):
    from llmsim.spec.presets import PresetRegistry
    from llmsim.study.records import load, record

    return record(load(None, PresetRegistry(), overrides))


@pytest.mark.parametrize("case", SCENARIOS)
def test_an_estimate_writes_exactly_the_declared_columns_in_order(case):
    mode, whens, overrides = SCENARIOS[case]
    assert list(_record(overrides)) == [c.name for c in schema.for_mode(mode, *whens)]


def test_disaggregated_serving_writes_declared_columns():
    written = list(_record(["model=llama3-8b", "system.num_devices=4", "parallel.tp=1", "parallel.pp=1",
                            "workload.mode=serving", "workload.concurrency=16", "workload.input_len=512",
                            "workload.output_len=64", "serving.slo_tpot_s=0.05",
                            "serving.disaggregation={prefill: {tp: 1}, decode: {tp: 1}}"]))
    assert written == [c.name for c in schema.COLUMNS if c.name in written]
    assert {"prefill_devices", "kv_transfer_time_s", "colocated_slo_throughput_tokens_per_s_per_device"} <= set(written)


def test_a_request_rate_with_an_slo_writes_declared_columns_in_order():
    written = list(_record(["workload.mode=serving", "workload.request_rate_per_s=1", *LENGTHS,
                            "serving.slo_tpot_s=0.05"]))
    assert written == [c.name for c in schema.COLUMNS if c.name in written]
    assert {"slo_request_rate_per_s", "slo_throughput_tokens_per_s_per_device", "ttft_p90_s"} <= set(written)


def test_the_estimate_tables_show_declared_columns():
    from llmsim.output import tables

    shown = [key for rows in (tables.TIME_ROWS, tables.MEMORY_ROWS, tables.INFERENCE_TIME_ROWS, tables.DECODE_ROWS,
                              tables.INFERENCE_MEMORY_ROWS) for _, key in rows]
    assert shown and all(schema.get(key) for key in shown)

