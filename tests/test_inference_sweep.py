"""Inference sweeps as columns: every row equals `estimate.record` of its point; the collective tuner
times each size of an array as it times that size alone, to the bit."""

import math

import numpy as np
import pytest
from conftest import one_network_per_shape

from llmsim.engine.errors import DesignError
from llmsim.engine.network.collectives import OPS, collective, collective_columns
from llmsim.engine.network.topology import path_of
from llmsim.spec.convert import network_values
from llmsim.spec.sweep import load_sweep
from llmsim.study.evaluate import _Context
from llmsim.study.records import record
from llmsim.study.sweep import run

# three groups (dense GQA, MoE, MoE with MLA) x tp (16: across nodes), pp, ep (from dp or inside tp),
# device counts, batch sizes (max among them: a categorical value), prompt and output lengths
SPEC = """\
base:
  model: llama3-70b
  system: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}
  parallel: {tp: 8, pp: 1}
  workload: {mode: inference, precision: fp8, batch_size: 1, input_len: 2048, output_len: 512}
keep: all
constraints:
  - "tpot_s < 0.2"
zip:
  model: [llama3-70b, mixtral-8x7b, deepseek-v3]
  system.accelerator: [a100-sxm-80gb, h100-sxm, h200-sxm]
  system.network: [dgx-a100, dgx-h100, dgx-h200]
  workload.precision: [bf16, fp8, fp8]
grid:
  parallel.tp: [1, 2, 4, 8, 16]
  parallel.pp: [1, 2, 3]
  parallel.ep: [1, 2, 8]
  system.num_devices: [8, 16, 64]
  workload.batch_size: [1, 24, 700, max]
  workload.input_len: [128, 3000]
  workload.output_len: [1, 300]
"""


def _same(a, b) -> bool:
    """Equal to 1e-12 relative; strings and booleans exactly; None and NaN alike."""
    missing = lambda v: v is None or (isinstance(v, float) and math.isnan(v))
    if missing(a) or missing(b):
        return missing(a) and missing(b)
    if isinstance(a, (str, bool, np.bool_)) or isinstance(b, (str, bool, np.bool_)):
        return a == b
    return a == pytest.approx(b, rel=1e-12, abs=0)


def plain(v):
    return v.item() if isinstance(v, np.generic) else v


def _check_rows(spec, rows, sample) -> dict:
    """Each sampled row against ``estimate.record`` of its point (one scenario per point, as
    ``llmsim estimate`` builds it); returns how many rows of each kind were checked."""
    ctx = _Context(spec, ())
    kinds: dict = {}
    for _, row in rows.iloc[sample].iterrows():
        reason, overrides = row["infeasible_reason"], spec.point(int(row["point"]))
        try:
            sc = ctx.scenario(overrides)
            rec = record(sc)
        except DesignError as err:  # an invalid split, or a max batch of which not one sequence fits
            assert reason == err.message
            kinds["invalid"] = kinds.get("invalid", 0) + 1
            for (path, value) in overrides:
                if path[-1] in ("tp", "pp", "ep", "num_devices", "input_len", "output_len", "precision"):
                    assert plain(row[path[-1]]) == value, path
            continue
        for col, value in rec.items():
            assert _same(plain(row[col]), value), (col, row[col], value, overrides)
        if not rec["fits_in_memory"]:
            assert reason == "does not fit in memory"
        elif rec["tpot_s"] >= 0.2:
            assert reason == "constraint tpot_s < 0.2"
        else:
            assert reason is None or (isinstance(reason, float) and math.isnan(reason))
        tags = ["moe" if sc.model.moe else "dense", "pp>1" if sc.parallel.pp > 1 else "pp=1",
                "max" if sc.workload.batch_size == "max" else "batch", "tp16" if sc.parallel.tp > 8 else "tp<=8"]
        if sc.model.moe and sc.parallel.ep > 1:
            tags.append("ep in tp" if rec["dp"] % sc.parallel.ep else "ep from dp")
        for tag in tags:
            kinds[tag] = kinds.get(tag, 0) + 1
    return kinds


def test_sampled_rows_of_a_vectorised_inference_sweep_equal_estimate_record(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC)
    spec = load_sweep(path)
    rows = run(spec, (), 1)
    assert len(rows) == spec.size and list(rows["point"]) == list(range(spec.size))
    reasons = rows["infeasible_reason"]
    valid = reasons.isna() | reasons.isin(["does not fit in memory", "constraint tpot_s < 0.2"])
    rng = np.random.default_rng(7)
    # half the sample among evaluated rows (most points are invalid splits), the rest anywhere
    sample = np.concatenate([rng.choice(np.flatnonzero(valid), 240, replace=False),
                             rng.choice(len(rows), 60, replace=False)])
    kinds = _check_rows(spec, rows, sample)
    for kind in ("dense", "moe", "pp>1", "max", "tp16", "ep in tp", "ep from dp", "invalid"):
        assert kinds.get(kind, 0) >= 5, kinds
    assert reasons.str.startswith("batch_size max: not even one").any()


def test_cp_must_divide_each_rows_own_prompt(tmp_path):
    # cp is only checked in inference: each row's prompt length (a column) must be divisible by it
    path = tmp_path / "s.yaml"
    path.write_text(SPEC.split("keep:")[0] + "keep: all\ngrid:\n  parallel.tp: [2]\n  parallel.cp: [1, 2, 4]\n"
                    "  workload.input_len: [126, 127, 128]\n  workload.batch_size: [4, max]\n")
    spec = load_sweep(path)
    rows = run(spec, (), 1)
    for length, cp in ((127, 2), (126, 4), (127, 4)):
        assert (rows["infeasible_reason"] == f"seq_len ({length}) is not divisible by cp ({cp})").sum() == 2  # batch 4 and max
    _check_rows(spec, rows, np.arange(len(rows)))


@pytest.mark.parametrize("keep", ["all", "feasible"])
def test_a_group_without_a_valid_split_gives_its_reasons(tmp_path, keep):
    # tp 3 and 5 divide neither the heads nor the devices: nothing reaches the engine
    for mode in ("inference", "training"):
        path = tmp_path / "s.yaml"
        path.write_text(SPEC.split("keep:")[0].replace("mode: inference", f"mode: {mode}, global_batch_size: 64")
                        + f"keep: {keep}\ngrid:\n  parallel.tp: [3, 5]\n")
        rows = run(load_sweep(path), (), 1)
        if keep == "all":
            assert list(rows["infeasible_reason"]) == ["num_devices (8) is not divisible by tp*pp*cp (3*1*1 = 3)",
                                                       "num_devices (8) is not divisible by tp*pp*cp (5*1*1 = 5)"]
            assert list(rows["tp"]) == [3, 5] and list(rows["model"]) == ["llama3-70b"] * 2
        else:
            assert len(rows) == 0


SIZES = np.concatenate([[1.0, 3.0, 8.0], np.geomspace(16, 3e10, 17), [2.0**20, 2.0**30, 12345.678]])


def test_a_size_in_an_array_is_timed_as_it_is_alone_to_the_bit(registry, monkeypatch):
    # the tuner evaluates every candidate on all sizes at once (the hierarchical one through masked
    # sub-collectives): no size may borrow another's algorithm or mask; nothing remembered, so that each
    # size alone is computed afresh
    from llmsim.engine.network import tuner

    monkeypatch.setattr(tuner, "REMEMBERED_PER_CALL", 0)
    checked = set()
    for net in one_network_per_shape():
        network = network_values(registry.get("networks", net))
        for stride, n in ((1, 2), (1, 8), (2, 4), (4, 16), (8, 2), (8, 16), (1, 64), (16, 64), (64, 4), (1, 256)):
            if stride * n > network.tiers[-1].size:
                continue
            path = path_of(network, stride, n).resized(n)
            for op in OPS:
                timed = collective_columns(op, SIZES, path)
                for s, t, name in zip(SIZES, timed.times, timed.names(op), strict=True):
                    r = collective(op, float(s), path)
                    assert t == r.time_s, (net, op, s, path)
                    assert name == f"{op} {r.algorithm}/{r.protocol} on {r.tiers}", (net, op, s, path)
                    checked.add(r.algorithm)
    assert checked == {"ring", "tree", "pairwise", "direct", "torus", "in-network", "in-network-tree", "hierarchical",
                       "send-recv"}
    timed = collective_columns("all_reduce", np.array([0.0, 8.0]), path)
    assert timed.times[0] == 0.0 and timed.names("all_reduce")[0] is None and timed.times[1] > 0
