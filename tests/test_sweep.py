"""Sweeps: spec expansion, safe constraints, Pareto ranks against brute force, rows equal estimate."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from llmsim.spec.errors import SpecError
from llmsim.spec.expr import Expr
from llmsim.spec.sweep import load_sweep
from llmsim.study.pareto import pareto_rank
from llmsim.study.records import load, record
from llmsim.study.sweep import compare, evaluate_range, rank, run

SPEC = """\
base:
  model: llama3-8b
  system: {accelerator: h100-sxm, num_devices: 64, network: dgx-h100}
  parallel: {microbatch_size: 1, recompute: selective, zero_stage: 1}
  workload: {mode: training, precision: bf16, seq_len: 4096, global_batch_size: 512}
grid:
  parallel.tp: [1, 2, 4, 8]
  parallel.pp: {from: 1, to: 8, mul: 2}
  system.accelerator: [h100-sxm, a100-sxm-80gb]
constraints:
  - "tp * pp <= 16"
objectives:
  - maximize: tokens_per_s
  - minimize: cost_per_million_tokens_usd
"""


@pytest.fixture()
def spec_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC)
    return path


def _brute_force_ranks(v: np.ndarray) -> np.ndarray:
    """O(n^2) non-dominated sorting (minimisation): peel fronts one by one."""
    _n, left, ranks, r = len(v), set(range(len(v))), np.zeros(len(v), int), 0
    while left:
        front = {i for i in left if not any(np.all(v[j] <= v[i]) and np.any(v[j] < v[i]) for j in left)}
        for i in front:
            ranks[i] = r
        left -= front
        r += 1
    return ranks


@settings(max_examples=30, deadline=None)
@given(arrays(float, st.tuples(st.integers(1, 40), st.integers(1, 4)), elements=st.integers(0, 5).map(float)))
def test_pareto_ranks_equal_brute_force(v):
    assert np.array_equal(pareto_rank(v, [False] * v.shape[1]), _brute_force_ranks(v))
    # maximising a column is minimising its negation
    assert np.array_equal(pareto_rank(-v, [True] * v.shape[1]), _brute_force_ranks(v))


def test_expansion_ranges_and_point_decoding(spec_file):
    sp = load_sweep(spec_file)
    assert sp.size == 4 * 4 * 2  # tp 4 values, pp 1..8 by x2 = 4 values, 2 accelerators
    assert [{".".join(p): v for p, v in sp.point(i)} for i in (0, 1, 31)] == [
        {"parallel.tp": 1, "parallel.pp": 1, "system.accelerator": "h100-sxm"},
        {"parallel.tp": 1, "parallel.pp": 1, "system.accelerator": "a100-sxm-80gb"},
        {"parallel.tp": 8, "parallel.pp": 8, "system.accelerator": "a100-sxm-80gb"}]


def test_sweep_rows_equal_estimate_of_the_same_point(spec_file, registry):
    sp = load_sweep(spec_file)
    rows = evaluate_range(sp, (), 0, sp.size).to_dict("records")
    assert rows and all(r["tp"] * r["pp"] <= 16 for r in rows)
    for r in rows[::3]:
        sc = load(None, registry, ["model=llama3-8b", f"system.accelerator={r['accelerator']}",
                                   "system.num_devices=64", "system.network=dgx-h100", f"parallel.tp={r['tp']}",
                                   f"parallel.pp={r['pp']}", "parallel.dp=null", "parallel.cp=1", "parallel.ep=1",
                                   "parallel.microbatch_size=1", "parallel.virtual_stages=1",
                                   "parallel.recompute=selective", "parallel.zero_stage=1", "workload.seq_len=4096",
                                   "workload.global_batch_size=512"])
        ref = record(sc)
        assert r["step_time_s"] == pytest.approx(ref["step_time_s"], rel=1e-12)
        assert r["cost_per_million_tokens_usd"] == pytest.approx(ref["cost_per_million_tokens_usd"], rel=1e-12)
        for col, value in ref.items():  # every column, numbers and names alike (None: an empty cell)
            if value is None:
                assert pd.isna(r[col]), col
            else:
                assert r[col] == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), col


def test_ranked_rows_put_the_front_first(spec_file):
    sp = load_sweep(spec_file)
    rows = rank(evaluate_range(sp, (), 0, sp.size), sp.objectives).to_dict("records")
    ranks = [r["pareto_rank"] for r in rows]
    assert ranks == sorted(ranks) and ranks[0] == 0
    front = [r for r in rows if r["pareto_rank"] == 0]
    # nothing on the front is beaten on both objectives by any other row
    for f in front:
        assert not any(o["tokens_per_s"] > f["tokens_per_s"] and
                       o["cost_per_million_tokens_usd"] < f["cost_per_million_tokens_usd"] for o in rows)


def test_constraints_are_never_evaluated_as_python():
    assert Expr("tp * pp <= max(8, num_devices // 8) and not dp == 3")({"tp": 2, "pp": 4, "num_devices": 64, "dp": 1})
    for bad in ("__import__('os').system('true')", "tp.__class__", "[x for x in y]", "open('f')"):
        with pytest.raises(ValueError):
            Expr(bad)


@pytest.mark.parametrize("text,message", [
    ("grid:\n  parallel.tp: 3\n", "grid.parallel.tp"),
    ("grid:\n  workload.seq_len: auto\n", "auto is only allowed"),
    ("constraints:\n  - \"__import__('os')\"\n", "constraints.0"),
    ("objectives:\n  - best: tokens_per_s\n", "objectives.0"),
    ("frobnicate: 1\n", "unknown key 'frobnicate'"),
])
def test_bad_specs_are_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(SPEC.split("grid:")[0] + text)
    r = run_cli("sweep", str(path))
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and str(path) in r.stderr and "Traceback" not in r.stderr


def test_sweep_cli_writes_atomically_and_ranks(spec_file, tmp_path):
    out = tmp_path / "r.json"
    r = run_cli("sweep", str(spec_file), "--jobs", "2", "--top", "3", "-o", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 3 and rows[0]["pareto_rank"] == 0
    assert not list(tmp_path.glob(".r.json.*"))  # no temp file left behind
    r = run_cli("sweep", str(spec_file), "-o", str(tmp_path / "missing" / "r.csv"))
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("sweep", str(spec_file), "--pareto-only")
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("model,accelerator,")


def test_search_returns_the_best_feasible_split_first():
    r = run_cli("search", "--model", "llama3-8b", "--devices", "8", "--global-batch-size", "64", "--top", "50",
                "--jobs", "1", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    speeds = [x["tokens_per_s"] for x in rows]
    assert speeds == sorted(speeds, reverse=True) and all(x["fits_in_memory"] for x in rows)
    best = rows[0]
    est = run_cli("estimate", "--model", "llama3-8b", "--devices", "8", "--global-batch-size", "64",
                  "--tp", str(best["tp"]), "--pp", str(best["pp"]), "--microbatch-size", str(best["microbatch_size"]),
                  "--recompute", best["recompute"], "--zero-stage", str(best["zero_stage"]), "--format", "json")
    assert json.loads(est.stdout)["tokens_per_s"] == pytest.approx(best["tokens_per_s"], rel=1e-12)


def test_search_keeps_the_scenarios_recompute_modules():
    # a scenario's selective:<modules> joins none/selective/full: every split of Llama 3 8B on 8 GPUs is
    # tried with it as well, so it appears among the ranked rows (written one way: modules in order)
    r = run_cli("search", "--model", "llama3-8b", "--devices", "8", "--global-batch-size", "64", "--top", "5000",
                "--jobs", "1", "--format", "json", "--set", "parallel.recompute=selective:mlp+layernorm")
    assert r.returncode == 0, r.stderr
    modes = {x["recompute"] for x in json.loads(r.stdout)}
    assert modes == {"none", "selective", "full", "selective:layernorm+mlp"}


def test_dask_cluster_gives_the_local_results(spec_file):
    pytest.importorskip("distributed")
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        remote = run_cli("sweep", str(spec_file), "--backend", "dask", "--scheduler", cluster.scheduler_address)
    local = run_cli("sweep", str(spec_file), "--jobs", "1")
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout and remote.stdout.count("\n") > 5


def test_compare_adds_factor_and_cumulative_columns(tmp_path):
    # tokens 100, 200, infeasible, 300: factors 2.0 then 1.5 over the last feasible row, cumulative 2, 3
    rows = pd.DataFrame({"tokens_per_s": [100.0, 200.0, 999.0, 300.0],
                         "infeasible_reason": [None, None, "does not fit in memory", None]})
    out = compare(rows, "tokens_per_s")
    assert out["tokens_per_s_vs_previous"].tolist() == pytest.approx([np.nan, 2.0, np.nan, 1.5], nan_ok=True)
    assert out["tokens_per_s_vs_first"].tolist() == pytest.approx([np.nan, 2.0, np.nan, 3.0], nan_ok=True)
    # shares of the 3x total: ln 2 / ln 3 = 0.6309 and ln 1.5 / ln 3 = 0.3691, summing to 1
    assert out["tokens_per_s_share"].tolist() == pytest.approx([np.nan, 0.6309, np.nan, 0.3691], abs=1e-4,
                                                               nan_ok=True)
    with pytest.raises(SpecError, match="compare column 'nope'"):
        compare(rows, "nope")


def test_a_grid_key_without_an_output_column_gets_one(tmp_path):
    # two kernels x two accelerators: without a moe_gemm_kernel column the H100 rows would not tell apart;
    # serving.speculative.draft_tokens has its column already (speculative_draft_tokens), so none is added
    path = tmp_path / "kernels.yaml"
    path.write_text("base:\n  model: mixtral-8x7b\n  system: {accelerator: h100-sxm, network: dgx-h100, "
                    "num_devices: 2}\n  parallel: {tp: 2, pp: 1}\n  workload: {mode: inference, precision: fp16, "
                    "batch_size: 1, input_len: 2048, output_len: 1}\ngrid:\n  system.accelerator: [h100-sxm, "
                    "a100-sxm-80gb]\n  parallel.moe_gemm_kernel: [native, sm80]\n")
    rows = run(load_sweep(path), ())
    assert rows["moe_gemm_kernel"].tolist() == ["native", "sm80"] * 2
    h100 = rows[rows["accelerator"] == "h100-sxm"].set_index("moe_gemm_kernel")["ttft_s"]
    assert h100["sm80"] > h100["native"]
    from llmsim.study.sweep import expected_columns

    names = expected_columns(load_sweep(path))
    assert "moe_gemm_kernel" in names and names.index("moe_gemm_kernel") < names.index("infeasible_reason")
    spec = tmp_path / "draft.yaml"
    spec.write_text("base:\n  model: llama3-8b\n  system: {accelerator: h100-sxm, network: dgx-h100, num_devices: 1}"
                    "\n  parallel: {tp: 1, pp: 1}\n  workload: {mode: serving, input_len: 128, output_len: 64, "
                    "concurrency: 1}\n  serving: {speculative: {draft_tokens: 2, acceptance_rate: 0.7}}\ngrid:\n"
                    "  serving.speculative.draft_tokens: [2, 4]\n")
    rows = run(load_sweep(spec), ())
    assert "draft_tokens" not in rows and rows["speculative_draft_tokens"].tolist() == [2, 4]
    # a model override is a column of its own (not layers_per_stage's); a failed group with a mapping value
    # keeps it as JSON text beside its reason (keep: all)
    spec.write_text("base:\n  model: llama3-8b\n  system: {accelerator: h100-sxm, network: dgx-h100, num_devices: 8}"
                    "\n  parallel: {tp: 1, pp: 1}\n  workload: {mode: serving, input_len: 128, output_len: 64, "
                    "concurrency: 8}\nkeep: all\ngrid:\n  model.layers: [32, 40]\n  serving.speculative: [null, "
                    "{acceptance_rate: 2.0}]\n")
    rows = run(load_sweep(spec), ())
    assert rows["layers"].tolist() == [32, 32, 40, 40] and rows["layers_per_stage"].tolist()[::2] == [32, 40]
    bad = rows[rows["infeasible_reason"].notna()]
    assert bad["speculative"].tolist() == ['{"acceptance_rate": 2.0}'] * 2
    assert bad["infeasible_reason"].str.contains("acceptance_rate").all()


def test_the_sweep_says_how_many_points_it_left_out(tmp_path):
    # 2 accelerators x 2 kernels: sm80 has no measured rate on the B200, so 1 of 4 points is infeasible
    path = tmp_path / "kernels.yaml"
    path.write_text("base:\n  model: mixtral-8x7b\n  system: {accelerator: h100-sxm, network: dgx-h100, "
                    "num_devices: 2}\n  parallel: {tp: 2, pp: 1}\n  workload: {mode: inference, precision: fp16, "
                    "batch_size: 1, input_len: 128, output_len: 8}\ngrid:\n  system.accelerator: [h100-sxm, b200]"
                    "\n  parallel.moe_gemm_kernel: [native, sm80]\n")
    r = run_cli("sweep", str(path), "--jobs", "1", "-o", str(tmp_path / "out.csv"))
    assert r.returncode == 0 and "3 rows written" in r.stderr
    assert "1 of 4 design points infeasible and left out; 'keep: all'" in r.stderr
    r = run_cli("sweep", str(path), "--jobs", "1", "--pareto-only", "-o", str(tmp_path / "front.csv"))
    assert "left out" not in r.stderr  # the front drops points by design
    r = run_cli("sweep", str(path), "--jobs", "1", "--top", "10", "-o", str(tmp_path / "top.csv"))
    assert "1 of 4 design points infeasible and left out" in r.stderr  # 3 rows < 10: all the feasible ones
    r = run_cli("sweep", str(path), "--jobs", "1", "--top", "2", "-o", str(tmp_path / "top2.csv"))
    assert "left out" not in r.stderr  # 2 rows of 3 feasible: --top cut them, not feasibility


def test_pareto_only_reduces_each_chunk_to_its_front_without_losing_the_sweep_front(spec_file):
    sp = load_sweep(spec_file)
    full = rank(run(sp, (), 1), sp.objectives)
    front = full[full["pareto_rank"] == 0]
    reduced = rank(run(sp, (), 1, chunk=5, front_only=True), sp.objectives)  # 7 chunks of <= 5 points
    assert len(reduced) < len(full)
    assert sorted(reduced[reduced["pareto_rank"] == 0]["point"]) == sorted(front["point"])


def test_vectorised_constraints_match_row_by_row():
    cols = {"tp": np.array([1, 2, 4, 8]), "pp": np.array([8, 4, 2, 1]), "dp": np.array([1, 3, 1, 3])}
    for text in ("tp * pp <= 8 and not dp == 3", "max(tp, pp) >= 4 or dp > 2", "1 < tp <= 4", "abs(-tp) == min(tp, 8)"):
        e = Expr(text)
        rows = [dict(zip(cols, v, strict=True)) for v in zip(*cols.values(), strict=True)]
        assert e.mask(cols).tolist() == [bool(e(r)) for r in rows], text


def test_inference_sweeps_apply_constraints(tmp_path):
    # the bundled HBM study (5 memories x batch 1 and 64 = 10 inference points) with a TPOT bound of
    # 12.1 ms. TPOT at batch 1: HBM2e 13.0, HBM3 10.6, HBM3e 9.7, HBM4 8.8, HBM4e 8.6 ms; at batch 64:
    # 17.1, 13.6, 12.2, 11.7, 11.5 ms. Over the bound: HBM2e (both), HBM3 and HBM3e at 64 = 4 rows
    text = (Path(__file__).parent.parent / "sweeps" / "decode-across-hbm.yaml").read_text()
    path = tmp_path / "s.yaml"
    path.write_text(text + "\nkeep: all\nconstraints:\n  - \"tpot_s < 0.0121\"\n")
    rows = run(load_sweep(path), (), 1)
    assert len(rows) == 10 and rows["tpot_s"].notna().all()
    broken = rows["infeasible_reason"].notna()
    assert (rows.loc[broken, "tpot_s"] >= 0.0121).all() and (rows.loc[~broken, "tpot_s"] < 0.0121).all()
    assert broken.sum() == 4 and set(rows.loc[broken, "infeasible_reason"]) == {"constraint tpot_s < 0.0121"}


@pytest.mark.parametrize("pareto_only,top", [(False, None), (True, None), (False, 9)])
def test_streamed_output_equals_the_in_memory_ranking(spec_file, tmp_path, monkeypatch, pareto_only, top):
    # 32 points in tasks of at most 5 (the 16 points of each accelerator cut into 4: 8 part files; with
    # --pareto-only the chunks' fronts come back and go to one part file), rendered 2 parts per group (the
    # best 9 rows come from 2 groups), keep: all and compare on: the merge by output position must give
    # the rows and values of rank(compare(run())); with --pareto-only the ratios are those of the rows
    # written (the sweep's front, in point order), whatever the chunks
    import llmsim.study.stream as ss
    import llmsim.study.sweep as sw
    from llmsim.output import sweep_writer
    from llmsim.output.writers import frame_records, to_csv

    spec_file.write_text(SPEC + "keep: all\ncompare: tokens_per_s\n")
    sp = load_sweep(spec_file)
    monkeypatch.setattr(sw, "CHUNK", 5)
    monkeypatch.setattr(ss, "MAX_RUNS", 4)
    rows = run(sp, (), 1, chunk=5, front_only=pareto_only)
    if pareto_only:
        rows = rows[sw.on_front(rows, sp.objectives)].reset_index(drop=True)
    ref = rank(compare(rows, sp.compare), sp.objectives)
    ref = ref.iloc[:top] if top else ref
    parts = ss.evaluate(sp, (), str(tmp_path), 1, pareto_only)
    plan = ss.plan(sp, parts, pareto_only, top)
    assert len(parts) >= (1 if pareto_only else 6) and len(plan.groups) >= (1 if pareto_only else 2 if top else 3) and plan.columns == [c for c in sw.columns(ref) if c != "point"]
    expected = pd.read_csv(io.StringIO(to_csv(frame_records(ref, plan.columns), plan.columns)))
    streamed = pd.read_csv(io.StringIO("".join(sweep_writer.text(plan, "csv", str(tmp_path), 2))))
    assert len(streamed) == (9 if top else len(ref)) and streamed["infeasible_reason"].notna().any() == (not pareto_only and not top)
    pd.testing.assert_frame_equal(streamed, expected, check_dtype=False)
    assert json.loads("".join(sweep_writer.text(plan, "json", str(tmp_path), 1))) == frame_records(ref, plan.columns)
    assert frame_records(sweep_writer.collect(plan), plan.columns) == frame_records(ref, plan.columns)  # Parquet's rows


def test_a100_to_b200_study_factors_are_improvements_and_shares_sum_to_one():
    # the bundled dissection: rows 2-8 each add one better part (node, memory, links, NVLink domain,
    # architecture, FP8, FP4) at one fixed split, so none may slow the step (the arithmetic of the
    # factor and share columns is worked by hand in test_compare_adds_factor_and_cumulative_columns)
    rows = compare(run(load_sweep(Path(__file__).parent.parent / "sweeps" / "a100-to-b200.yaml"), (), 1),
                   "tokens_per_s")
    assert len(rows) == 10 and rows["infeasible_reason"].isna().all()
    assert (rows["tokens_per_s_vs_previous"].iloc[2:9] > 1.0).all()
    # the fixed study split is not the A100's best: row 1 is slower than row 0 (the searched best split)
    assert rows["tokens_per_s_vs_previous"].iloc[1] < 1.0
    # of the order Paper B reports (~35x from A100 to B200): at least 10x, at most the 32x peak ratio
    # (GB200 FP4 dense 10,000 TFLOP/s over A100 bf16 312 = 32x)
    assert 10 < rows["tokens_per_s_vs_first"].iloc[-1] < 10_000 / 312


@pytest.mark.parametrize("row, accelerator, network, precision", [
    (0, "a100-sxm-80gb", "dgx-a100", "bf16"), (9, "gb200", "gb200-nvl72", "fp4")])
def test_a100_to_b200_study_bookends_are_the_searched_best_splits(row, accelerator, network, precision):
    # README calls the study's first and last rows each system at its own best split: they must stay
    # what `llmsim search` finds for the same workload, or the 11.8x would mix in an arbitrary split
    study = run(load_sweep(Path(__file__).parent.parent / "sweeps" / "a100-to-b200.yaml"), (), 1)
    r = run_cli("search", "--model", "gpt-moe-1.8t", "--devices", "4096", "--global-batch-size", "2048",
                "--seq-len", "4096", "--accelerator", accelerator, "--network", network, "--precision", precision,
                "--top", "1", "--jobs", "1", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert study["tokens_per_s"].iloc[row] == pytest.approx(json.loads(r.stdout)[0]["tokens_per_s"], rel=1e-12)


def test_a_sweep_without_feasible_points_says_so_and_names_the_missing_key(tmp_path):
    # the base has no system.network: every point is invalid for that one reason. Kept rows name the key;
    # without keep: all the output is empty and stderr says why (it crashed in the merge before)
    spec = tmp_path / "s.yaml"
    spec.write_text("base: {model: llama3-8b, system: {accelerator: h100-sxm, num_devices: 8}}\n"
                    "grid: {parallel.tp: [1, 2]}\ncompare: tokens_per_s\n")
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1", "-o", str(tmp_path / "out.csv"))
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "no design point" in r.stderr and "keep: all" in r.stderr
    spec.write_text(spec.read_text().replace("compare: tokens_per_s\n", "keep: all\n"))
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1")
    rows = pd.read_csv(io.StringIO(r.stdout))
    assert rows["infeasible_reason"].tolist() == ["system.network: required key is missing"] * 2


def test_constraints_compare_text_columns_whatever_the_group_size(tmp_path):
    # the model, accelerator and network are one-value columns of each group: comparing two of them, or
    # one with a string, must act as on text (16 tp x pp points per accelerator; recompute a text input)
    path = tmp_path / "s.yaml"
    path.write_text(SPEC.replace('  - "tp * pp <= 16"', '  - "accelerator != network and recompute == \'selective\'"'))
    rows = run(load_sweep(path), (), 1)
    assert len(rows) == 32 and set(rows["accelerator"]) == {"h100-sxm", "a100-sxm-80gb"}
    path.write_text(SPEC.replace('  - "tp * pp <= 16"', '  - "model == accelerator"'))
    assert len(run(load_sweep(path), (), 1)) == 0


@pytest.mark.parametrize("extra", ["compare: tokens_per_s\n", "keep: all\n"])
def test_one_pass_csv_is_the_streamed_csv(spec_file, tmp_path, monkeypatch, extra):
    # the CSV of a sweep that fits in memory is written in one pass (sweep_writer.write_csv) and must be the
    # bytes the group-by-group render and line merge write (sweep_writer.text), here over 4 render groups;
    # keep: all gives parts where a column is all missing (no type) beside parts where it has one
    import llmsim.study.stream as ss
    import llmsim.study.sweep as sw
    from llmsim.output import sweep_writer

    spec_file.write_text(SPEC + extra)
    sp = load_sweep(spec_file)
    monkeypatch.setattr(sw, "CHUNK", 5)
    monkeypatch.setattr(ss, "MAX_RUNS", 4)
    plan = ss.plan(sp, ss.evaluate(sp, (), str(tmp_path), 1), False, None)
    streamed = "".join(sweep_writer.text(plan, "csv", str(tmp_path), 1))
    out = tmp_path / "out.csv"
    assert sweep_writer.write_csv(plan, out) and len(plan.groups) >= 2
    assert out.read_text() == streamed


def test_workers_beside_this_process_give_the_rows_one_process_gives(spec_file, tmp_path, monkeypatch):
    # --jobs 2: this process and one worker share the tasks (stream._local: the worker from the front, this
    # process from the back); the keys must be those of one process, in the same (task) order
    import llmsim.study.stream as ss
    import llmsim.study.sweep as sw

    sp = load_sweep(spec_file)
    monkeypatch.setattr(sw, "CHUNK", 5)
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = ss.evaluate(sp, (), str(tmp_path / "one"), 1)
    two = ss.evaluate(sp, (), str(tmp_path / "two"), 2)
    assert len(sw.tasks(sp)) >= 6 and len(two) == len(one)
    assert two.points.tolist() == one.points.tolist()
    np.testing.assert_array_equal(two.objectives, one.objectives)
    np.testing.assert_array_equal(two.feasible, one.feasible)
    # then the JSON writer's joblib workers start (joblib cannot take over the executor the tasks ran on)
    from llmsim.output import sweep_writer

    monkeypatch.setattr(ss, "MAX_RUNS", 4)
    plan = ss.plan(sp, two, False, None)
    assert len(plan.groups) >= 2 and len("".join(sweep_writer.text(plan, "jsonl", str(tmp_path / "two"), 2))
                                          .splitlines()) == plan.rows


@pytest.mark.parametrize(("study", "extra"), [
    ("sweeps/serving-cost-vs-latency.yaml", None),  # a front of many rows within each group
    ("sweeps/llama3-8b-splits.yaml", ("point", True)),  # an objective outside the engine's columns
])
def test_pareto_only_keeps_every_point_of_the_sweeps_front(study, extra, monkeypatch):
    # --pareto-only cuts each group, then each chunk, to its front; the rows kept must be exactly the
    # rank-0 rows of the whole sweep ranked at once (checked against the code before the group cut:
    # serving-cost-vs-latency 12 rows, 11 since the GEMM-by-shape model; with maximize: point, llama3-8b-splits
    # 35, where a cut that ignored point kept 6)
    import dataclasses

    import llmsim.study.sweep as sw

    sp = load_sweep(study)
    if extra is not None:
        sp = dataclasses.replace(sp, objectives=(*sp.objectives, extra))
    monkeypatch.setattr(sw, "CHUNK", 16)
    whole = rank(run(sp, (), 1), sp.objectives)
    front = set(whole.loc[whole["pareto_rank"] == 0, "point"])
    reduced = run(sp, (), 1, front_only=True)
    kept = set(reduced.loc[sw.on_front(reduced, sp.objectives), "point"])
    assert len(front) == (11 if extra is None else 35) and kept == front


def test_pareto_only_without_objectives_on_the_remote_path_keeps_every_row(spec_file, tmp_path):
    # --backend dask --pareto-only with no objectives: nothing to rank, so every row is kept (as without
    # --pareto-only); the remote path (workers hand back rows) crashed joining fronts that were never cut
    import llmsim.study.stream as ss

    spec_file.write_text(SPEC.split("objectives:")[0])
    sp = load_sweep(spec_file)
    assert not sp.objectives
    keys = ss.evaluate(sp, (), str(tmp_path), 1, True, remote=True)
    assert len(keys.points) == len(ss.evaluate(sp, (), str(tmp_path), 1, False).points) > 0
