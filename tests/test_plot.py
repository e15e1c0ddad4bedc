"""`llmsim plot`: each figure rendered from bundled data to PNG and SVG; errors are one line, exit 2."""

import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from conftest import run_cli
from typer.testing import CliRunner

pytest.importorskip("matplotlib")

from llmsim.cli import app
from llmsim.cli import plot as cli_plot
from llmsim.output import plot
from llmsim.spec.errors import SpecError

SPEC = """\
base:
  model: llama3-8b
  system: {accelerator: h100-sxm, num_devices: 16, network: dgx-h100}
  parallel: {tp: 1, pp: 1, microbatch_size: 1, recompute: selective, zero_stage: 1}
  workload: {mode: training, precision: bf16, seq_len: 4096, global_batch_size: 64}
zip:
  system.accelerator: [h100-sxm, a100-sxm-80gb]
  system.network: [dgx-h100, dgx-a100]
grid:
  system.num_devices: [8, 16]
  parallel.tp: [1, 2, 4]
  parallel.pp: [1, 2]
objectives:
  - maximize: tokens_per_s
  - minimize: cost_per_million_tokens_usd
"""
INFERENCE = ["--mode", "inference", "--model", "llama3-8b", "--devices", "1", "--tp", "1", "--pp", "1",
             "--batch-size", "8", "--input-len", "256", "--output-len", "64"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A small sweep (24 points) written as `llmsim sweep` writes it."""
    folder = tmp_path_factory.mktemp("sweep")
    spec, out = folder / "study.yaml", folder / "study.csv"
    spec.write_text(SPEC)
    res = CliRunner().invoke(app, ["sweep", str(spec), "--jobs", "1", "--quiet", "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _draw(*args: str) -> None:
    res = CliRunner().invoke(app, ["plot", *args])
    assert res.exit_code == 0, f"{res.output}{res.exception!r}"


def _check_image(path) -> None:
    data = path.read_bytes()
    if path.suffix == ".png":
        assert data[:4] == b"\x89PNG" and len(data) > 10_000
    else:
        assert ET.fromstring(data).tag.endswith("svg") and len(data) > 10_000
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")], "temporary file left behind"
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # a new file's usual mode, not mkstemp's 0600


@pytest.mark.parametrize("suffix", [".png", ".svg"])
@pytest.mark.parametrize("kind, args", [
    ("pareto", ["--x", "cost_per_million_tokens_usd", "--y", "tokens_per_s", "--color", "accelerator"]),
    ("pareto", ["--x", "step_time_s", "--y", "tokens_per_s", "--color", "mfu", "--logx"]),  # colour bar
    ("scaling", ["--x", "num_devices", "--y", "tokens_per_s", "--group", "accelerator", "--logx"]),
    ("scaling", ["--x", "tp", "--y", "step_time_s", "--logy"]),  # one line, the smallest step time per tp
    ("breakdown", ["--rows", "5"]),
])
def test_results_plots(results, tmp_path, kind, args, suffix):
    out = tmp_path / f"{kind}{suffix}"
    _draw(kind, str(results), *args, "-o", str(out))
    _check_image(out)


@pytest.mark.parametrize("kind, args", [
    ("roofline", []),
    ("roofline", INFERENCE),
    ("breakdown", []),
    ("breakdown", INFERENCE),
])
def test_scenario_plots(tmp_path, kind, args):
    out = tmp_path / f"{kind}.png"
    _draw(kind, *args, "-o", str(out))
    _check_image(out)


def test_roofline_places_decode_left_of_ridge(tmp_path):
    """Decode matmuls of a small batch are memory-bound: their intensity lies below the ridge."""
    from llmsim.spec.presets import PresetRegistry
    from llmsim.study import records as est

    sc = est.load(None, PresetRegistry(), est.overrides_from_flags(
        {"mode": "inference", "model": "llama3-8b", "devices": 1, "tp": 1, "pp": 1, "batch_size": 8,
         "input_len": 256, "output_len": 64}, []))
    rows = est.operator_rows(sc)
    ridge = sc.accelerator.peak("bf16") / sc.accelerator.hbm_bw_bytes_per_s
    decode = [r for r in rows if r["phase"] == "decode step" and r["flops"] > 0]
    assert decode and all(r["flops"] / r["bytes"] < ridge for r in decode)
    fig = plot.roofline_figure(rows, sc.accelerator.peak("bf16"), sc.accelerator.hbm_bw_bytes_per_s,
                               precision="bf16")
    assert len(fig.axes[0].collections) == sum(r["flops"] > 0 for r in rows)


def test_front_and_directions():
    x = np.array([1.0, 2.0, 3.0, 2.5])  # cost: smaller is better
    y = np.array([10.0, 30.0, 40.0, 20.0])  # tokens/s: larger is better
    assert plot.front_mask(x, y, False, True).tolist() == [True, True, True, False]
    assert plot.infer_maximize("tokens_per_s") and plot.infer_maximize("mfu")
    assert plot.infer_maximize("cost_per_million_tokens_usd") is False
    assert plot.infer_maximize("memory_per_device_gb") is False and plot.infer_maximize("tp") is None


@pytest.mark.parametrize("col, label", [
    ("tokens_per_s", "throughput (tokens/s)"),
    ("throughput_tokens_per_s_per_device", "throughput (tokens/s per device)"),
    ("cost_per_million_tokens_usd", "cost per million tokens (USD)"),
    ("step_time_s", "step time (s)"),
    ("memory_per_device_gb", "memory per device (GB)"),
    ("energy_per_token_j", "energy per token (J)"),
    ("ttft_s", "TTFT (s)"),
    ("mfu", "MFU (fraction of peak)"),
])
def test_axis_labels_carry_units(col, label):
    assert plot.axis_label(col) == label


def test_breakdown_parts_sum_to_step_time(results):
    import pandas as pd

    df = pd.read_csv(results)
    parts, _ = cli_plot.time_parts(df)
    assert np.allclose(sum(parts.values()), df["step_time_s"], rtol=1e-9)
    assert np.allclose(sum(cli_plot.memory_parts(df).values()), df["memory_per_device_gb"], rtol=1e-9)


def test_bad_column_is_one_line_exit_2(results, tmp_path):
    r = run_cli("plot", "pareto", str(results), "--x", "cost_usd", "--y", "tokens_per_s",
                "-o", str(tmp_path / "p.png"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and str(results) in line and "--x" in line and "'cost_usd'" in line
    assert "columns include: " in line and "tokens_per_s" in line
    assert not (tmp_path / "p.png").exists()


def test_bad_suffix_is_one_line_exit_2(results, tmp_path):
    r = run_cli("plot", "scaling", str(results), "--x", "num_devices", "--y", "mfu", "-o", str(tmp_path / "p.jpg"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "-o" in line and "'.jpg'" in line and "allowed: .png, .svg" in line


@pytest.mark.parametrize("args, message", [
    (["pareto", "{csv}", "--x", "tp", "--y", "pp"], "cannot tell whether"),  # no pareto_rank, no direction
    (["breakdown", "{csv}", "--tp", "4"], "--tp applies to a scenario"),
    (["pareto", "{csv}", "--x", "tp", "--y", "accelerator"], "--y: column 'accelerator' is not numeric"),
])
def test_usage_errors(tmp_path, results, args, message):
    import pandas as pd

    csv = tmp_path / "plain.csv"
    pd.read_csv(results).drop(columns=["pareto_rank"]).to_csv(csv, index=False)
    res = CliRunner().invoke(app, ["plot", *(a.format(csv=csv) for a in args), "-o", str(tmp_path / "x.png")])
    assert isinstance(res.exception, SpecError) and message in str(res.exception)


def test_without_matplotlib(monkeypatch, results, tmp_path):
    import llmsim.output

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)  # import of matplotlib halted
    monkeypatch.delitem(sys.modules, "llmsim.output.plot")
    monkeypatch.delattr(llmsim.output, "plot")
    res = CliRunner().invoke(app, ["plot", "pareto", str(results), "--x", "mfu", "--y", "tokens_per_s",
                                   "-o", str(tmp_path / "p.png")])
    assert isinstance(res.exception, SpecError)
    assert str(res.exception) == "llmsim plot needs matplotlib: pip install 'llmsim[plot]'"


def test_scenario_flags_are_estimates_flags():
    """roofline/breakdown borrow estimate's parameters: each must be a scenario flag (or listed as not one)."""
    import inspect

    from llmsim.cli.estimate import estimate
    from llmsim.spec.flags import flag_paths

    borrowed = set(inspect.signature(estimate).parameters) - set(cli_plot.NOT_SCENARIO_FLAGS) - {"scenario", "set_"}
    assert borrowed <= set(flag_paths()), "add estimate's new non-scenario option to NOT_SCENARIO_FLAGS"
