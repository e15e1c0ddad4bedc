"""Sweeps at scale: splits that cannot fit are dropped before timing, with the rows unchanged; the streamed
command's output equals the in-memory ranking."""

import io

import numpy as np
import pandas as pd
from conftest import run_main

from llmsim.spec.sweep import load_sweep
from llmsim.study.modes import training as mode_training
from llmsim.study.sweep import rank, run

# llama3-70b and gpt3-175b on 8 to 64 devices of 80 GB with ZeRO 0-3: many splits cannot hold their states
SPEC = """\
base: {model: llama3-70b, system: {accelerator: h100-sxm, num_devices: 64, network: dgx-h100},
       workload: {mode: training, precision: bf16, seq_len: 4096, global_batch_size: 512}}
grid:
  model: [llama3-70b, gpt3-175b, mixtral-8x7b]
  system.num_devices: [8, 16, 64]
  parallel.tp: [1, 2, 4, 8]
  parallel.pp: [1, 2, 4, 8]
  parallel.zero_stage: [0, 1, 2, 3]
  parallel.cp: [1, 2]
objectives:
  - maximize: tokens_per_s
  - minimize: memory_per_device_gb
"""


def _spec(tmp_path, extra=""):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC + extra)
    return path


def test_memory_floor_is_below_the_memory_of_every_split(tmp_path, monkeypatch):
    # the bound the sweep drops splits by never exceeds the engine's memory: over every valid split
    from llmsim.engine.training import memory_floor_bytes

    seen = []

    def spy(sc, split, ok):
        rows = np.flatnonzero(ok)
        seen.append((sc, split.take(rows)))
        return np.zeros(len(ok), bool)

    monkeypatch.setattr(mode_training, "surely_too_big", spy)
    rows = run(load_sweep(_spec(tmp_path, "keep: feasible\n")), (), 1)
    from llmsim.study.modes.training import training_record

    checked = 0
    for sc, split in seen:
        if not len(split.tp):
            continue
        n = np.full(len(split.tp), 64)
        mem_gb = np.asarray(training_record(sc, split, n, np.full(len(split.tp), 512))["memory_per_device_gb"])
        assert (memory_floor_bytes(sc, split) / 1e9 <= mem_gb).all()
        checked += len(split.tp)
    assert checked > 300 and len(rows)


def test_splits_that_cannot_fit_are_dropped_untimed_and_the_rows_are_unchanged(tmp_path, monkeypatch):
    # keep: all times every valid split and reports those that do not fit; without it the splits over the
    # floor are never timed, and the CSV is byte for byte the keep: all CSV's feasible rows (they come first)
    from llmsim.study.modes import training as mode_training

    timed = []
    real = mode_training.training_record

    def count(sc, sub, *a):
        timed.append(len(sub.tp))
        return real(sc, sub, *a)

    monkeypatch.setattr(mode_training, "training_record", count)
    texts = {}
    for keep in ("all", "feasible"):
        timed.clear()
        out = tmp_path / f"{keep}.csv"
        code, _, err = run_main("sweep", str(_spec(tmp_path, f"keep: {keep}\n")), "--jobs", "1", "--quiet", "-o", str(out))
        assert code == 0, err
        texts[keep] = (out.read_text().splitlines(keepends=True), sum(timed))
    (every, timed_all), (feasible, timed_feasible) = texts["all"], texts["feasible"]
    assert timed_feasible < timed_all - 100  # the floor dropped splits before timing
    assert sum(line.endswith(",does not fit in memory\n") for line in every) > 100
    assert len(feasible) > 100 and every[:len(feasible)] == feasible
    assert every[len(feasible)].rstrip("\n").split(",")[-1] != ""  # the next row is infeasible


def test_the_streamed_command_writes_the_in_memory_ranking(tmp_path, monkeypatch):
    # the command streams rows through part files (tasks of 64 points, up to 3 groups of parts): the CSV equals
    # the ranked rows of the in-memory sweep, and --pareto-only its front
    from llmsim.study import stream
    from llmsim.study import sweep as sw

    monkeypatch.setattr(sw, "CHUNK", 64)
    monkeypatch.setattr(stream, "MAX_RUNS", 3)
    path = _spec(tmp_path, "keep: all\n")
    sp = load_sweep(path)
    ref = rank(run(sp, (), 1, chunk=64), sp.objectives).drop(columns="point")
    for flags, expect in (((), ref), (("--pareto-only",), ref[ref["pareto_rank"] == 0])):
        out = tmp_path / "o.csv"
        code, _, err = run_main("sweep", str(path), "--jobs", "1", "--quiet", *flags, "-o", str(out))
        assert code == 0, err
        got = pd.read_csv(out)
        want = pd.read_csv(io.StringIO(expect.to_csv(index=False)))[list(got.columns)]
        assert len(got) == len(expect) > 0
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
