"""llmsim validate --report DIR: Markdown report and parity plots."""

import subprocess
import sys

import pytest
from conftest import run_cli

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "validation"
    proc = run_cli("validate", "--report", str(out), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


@pytest.fixture(scope="module")
def report_dir(report):
    return report[0]


def test_readme_carries_the_errors_of_the_csv_rows(report, registry):
    # the figures are recomputed here from the per-record CSV the same command printed (predicted over
    # measured, mean of the absolute errors), not taken from the functions that wrote the README
    import csv
    import io

    out_dir, csv_text = report
    text = (out_dir / "README.md").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert {r["mode"] for r in rows} == {"training", "inference"}
    def error(r):  # throughput rows, first-token latency rows, or batch-1 time-per-output-token rows
        kind = next(k for k in ("tokens_per_s_per_device", "ttft_s", "tpot_s") if r.get(f"measured_{k}"))
        return float(r[f"predicted_{kind}"]) / float(r[f"measured_{kind}"]) - 1

    for mode, noun in (("training", "runs"), ("inference", "benchmarks")):
        # the headline is over the records the constants are fitted on (the 2025-2026 serving ones apart)
        errors = [error(r) for r in rows if r["mode"] == mode and r["record_set"] != "serving_2026"]
        mae = sum(abs(e) for e in errors) / len(errors)
        assert f"MAE **{100 * mae:.1f}%** over {len(errors)} {noun} (in-sample)" in text
    recent = [r for r in rows if r["record_set"] == "serving_2026" and r["metric"] == "tpot_s"
              and r["architecture"] == "MoE"]
    mae = sum(abs(error(r)) for r in recent) / len(recent)
    assert f"TPOT MoE {100 * mae:.1f}% ({len(recent)})" in text
    for r in rows:  # every record in the full tables, with its error
        assert f"`{r['id']}`" in text
        assert f"{100 * float(r['rel_error']):+.1f}%" in text
    from llmsim.validation.accuracy import assess

    for s in assess(registry).skipped:  # what the same command reports as not modelled
        assert f"`{s['id']}`" in text and s["reason"] in text
    assert "](parity-training.png)" in text and "](parity-inference.png)" in text


def test_parity_plots_are_valid_pngs(report_dir):
    for name in ("parity-training.png", "parity-inference.png"):
        data = (report_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 10_000
    assert not [p for p in report_dir.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_report_is_reproducible(report_dir):
    first = {p.name: p.read_bytes() for p in report_dir.iterdir()}
    proc = run_cli("validate", "--report", str(report_dir), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in report_dir.iterdir()} == first


def test_without_matplotlib_one_line_error(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from llmsim.cli import main; sys.argv = ['llmsim', 'validate', '--report', sys.argv[1]]; main()")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "r")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "llmsim: error: needs matplotlib: pip install 'llmsim[plot]'"
    assert not (tmp_path / "r").exists()


def test_methodology_worked_example_matches_estimate(registry):
    """docs/methodology.md follows the default scenario with the numbers the tool prints."""
    from pathlib import Path

    from llmsim.study import records as est

    doc = Path(__file__).resolve().parents[1] / "docs" / "methodology.md"
    if not doc.exists():
        pytest.skip("no docs/ in this installation")
    text = doc.read_text(encoding="utf-8")
    rec = est.record(est.load(None, registry, []))
    for shown in (f"{rec['step_time_s']:.3f} s", f"{rec['tokens_per_s']:,.0f}", f"{100 * rec['mfu']:.1f}%",
                  f"{rec['memory_per_device_gb']:.1f} GB", f"${rec['cost_per_million_tokens_usd']:.3f}",
                  f"{rec['bubble_time_s']:.3f} s", f"{rec['tp_comm_time_s']:.3f} s"):
        assert shown in text, shown
