"""Configurations published runs used, each accepted and modelled (issue 17, deliverable 5)."""

import pytest
from conftest import run_cli

from llmsim.study.auto import interleavings
from llmsim.study.records import load, record

# TorchTitan's Llama 3.1 405B on 512 H100 (FSDP 8 x TP 8 x PP 8, "Interleaved 1F1B"; the benchmark does
# not state the virtual stages per rank: torchtitan benchmarks/llama3_h100_202412_torchtitan.md, table 5)
TORCHTITAN_405B = ["model=llama3-405b", "system.accelerator=h100-sxm-96gb", "system.network=grand-teton-h100",
                   "system.num_devices=512", "parallel.tp=8", "parallel.pp=8", "parallel.zero_stage=3",
                   "parallel.recompute=full", "workload.precision=fp8", "workload.seq_len=8192",
                   "workload.global_batch_size=256", "parallel.microbatch_size=4"]


def test_virtual_stages_auto_picks_the_fastest_interleaving_that_fits(registry):
    # 126 layers on 8 stages: 16 layer slots per device, so 1, 2, 4, 8 or 16 chunks of equal size; 16
    # would need 8 x 16 = 128 chunks, more than the 126 layers
    sc = load(None, registry, [*TORCHTITAN_405B, "parallel.virtual_stages=auto"])
    assert interleavings(sc) == [1, 2, 4, 8]
    chosen = record(sc)
    each = {v: record(load(None, registry, [*TORCHTITAN_405B, f"parallel.virtual_stages={v}"])) for v in (1, 2, 4, 8)}
    fitting = {v: r["tokens_per_s"] for v, r in each.items() if r["fits_in_memory"]}
    assert fitting, "the published configuration must fit"
    best = max(fitting, key=fitting.get)
    assert chosen["virtual_stages"] == best and chosen["tokens_per_s"] == each[best]["tokens_per_s"]
    # interleaving divides the bubble by v (Narayanan eq. 2), so more than one chunk wins here
    assert best > 1 and each[best]["bubble_time_s"] < each[1]["bubble_time_s"]


def test_estimate_says_which_interleaving_it_picked():
    r = run_cli("estimate", *(f"--set={o}" for o in TORCHTITAN_405B), "--set", "parallel.virtual_stages=auto",
                "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "virtual_stages auto -> " in r.stderr and "(the fastest that fits of 1, 2, 4, 8)" in r.stderr


def _sweep_csv(tmp_path, parallel: str, grid: str, extra: str = ""):
    import pandas as pd

    spec = tmp_path / f"s{len(list(tmp_path.iterdir()))}.yaml"
    spec.write_text("base:\n  model: llama3-8b\n  system: {accelerator: h100-sxm, num_devices: 16, network: dgx-h100}\n"
                    f"  parallel: {{{parallel}}}\n"
                    "  workload: {mode: training, precision: bf16, seq_len: 4096, global_batch_size: 64}\n"
                    f"grid:\n{grid}{extra}keep: all\n")
    out = tmp_path / (spec.stem + ".csv")
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1", "-o", str(out))
    assert r.returncode == 0, r.stderr
    return pd.read_csv(out)


def test_virtual_stages_auto_in_a_sweep_is_the_best_row_of_the_listed_values(tmp_path):
    # llama3-8b: 32 layers on pp 2 = 16 per device, so v in 1, 2, 4, 8, 16 (each divides 16; pp*v <= 32).
    # The auto row of each microbatch must be the fastest row that fits of the sweep that lists them
    auto = _sweep_csv(tmp_path, "tp: 8, pp: 2, virtual_stages: auto", "  parallel.microbatch_size: [1, 2]\n")
    listed = _sweep_csv(tmp_path, "tp: 8, pp: 2", "  parallel.microbatch_size: [1, 2]\n"
                        "  parallel.virtual_stages: [1, 2, 4, 8, 16]\n")
    assert len(auto) == 2 and auto["infeasible_reason"].isna().all()
    for mb, row in auto.set_index("microbatch_size").iterrows():
        fit = listed[(listed.microbatch_size == mb) & listed.fits_in_memory.astype(bool)]
        best = fit.loc[fit.tokens_per_s.idxmax()]
        assert row.virtual_stages == best.virtual_stages and row.tokens_per_s == best.tokens_per_s


def test_the_published_interleaved_run_takes_its_frameworks_default(registry):
    # the record does not state the virtual stages; TorchTitan splits each rank into 2 stages for
    # multi-stage schedules (generate_split_points: num_stages_per_rank = 2), so the framework's default,
    # not llmsim's fastest (v = 8 would predict 206 tokens/s/GPU against the 128 measured)
    from llmsim.validation import runs

    items, _ = runs.cases(registry, (runs.TRAINING,))
    case = next(c for c in items if c.rec["id"] == "torchtitan_202412_llama31_405b_h100_512gpu_fsdp8_tp8_pp8_interleaved_fp8")
    assert case.scenario.parallel.virtual_stages == 2
    assert any("TorchTitan's default 2 stages per rank" in n for n in case.notes)


def test_search_and_plots_take_virtual_stages_auto(tmp_path):
    r = run_cli("search", "--model", "llama3-8b", "--devices", "16", "--global-batch-size", "64",
                "--set", "parallel.virtual_stages=auto", "--top", "3", "--jobs", "1", "--format", "csv")
    assert r.returncode == 0, r.stderr
    pytest.importorskip("matplotlib")
    r = run_cli("plot", "roofline", "--set", "parallel.virtual_stages=auto", "-o", str(tmp_path / "r.png"))
    assert r.returncode == 0 and (tmp_path / "r.png").stat().st_size > 1000, r.stderr


# Llama 3.1 405B (126 layers) on 16 pipeline stages of 8 virtual stages each = 128 chunks: Megatron-LM
# counts the embedding and the loss as a layer each (--account-for-embedding-in-pipeline-split,
# --account-for-loss-in-pipeline-split) to make them even; pp 16 with tp 4 on 128 B200 is Megatron-Bridge's
# llama31_405b_pretrain_128gpu_b200_nvfp4_config (docs.nvidia.com/nemo/megatron-bridge, perf_recipes)
PIPE_405B = ["model=llama3-405b", "system.accelerator=b200", "system.network=dgx-b200", "system.num_devices=128",
             "parallel.tp=4", "parallel.pp=16", "parallel.virtual_stages=8", "workload.precision=fp4",
             "workload.global_batch_size=64", "workload.seq_len=8192"]


def test_embedding_and_loss_stages_let_a_pipeline_take_two_more_chunks(registry):
    from llmsim.engine.errors import DesignError
    from llmsim.engine.split import resolve_split

    with pytest.raises(DesignError, match=r"pp\*virtual_stages \(16\*8\) exceeds layers \(126\)"):
        record(load(None, registry, PIPE_405B))
    sc = load(None, registry, [*PIPE_405B, "parallel.pipeline_embedding_stage=true", "parallel.pipeline_loss_stage=true"])
    sp = resolve_split(sc)
    # 128 slots / 16 stages = 8 per device: the first holds the embedding and 7 layers, the middle 14
    # stages 8 layers, the last 7 layers and the output layer: 7 + 14 x 8 + 7 = 126
    assert (sp.layers_per_stage, sp.last_layers) == (8, 7)
    rec = record(sc)
    assert rec["layers_per_stage"] == 8 and rec["step_time_s"] > 0


# DeepSeek-V3 on 1,024 H100: Megatron-Bridge's deepseek_v3_pretrain_1024gpu_h100_bf16_config, "Recommended
# parallelism: TP=2, PP=16, EP=64" (docs.nvidia.com/nemo/megatron-bridge, bridge.recipes.deepseek.h100): dp =
# 1024 / (2 x 16) = 32 < ep 64, so the expert layers are folded over the 64 tp x dp ranks of a stage
DSV3 = ["model=deepseek-v3", "system.num_devices=1024", "parallel.tp=2", "parallel.pp=16", "parallel.ep=64",
        "workload.global_batch_size=8192", "workload.seq_len=4096"]


def test_moe_parallel_folding_lets_ep_exceed_dp(registry):
    from llmsim.engine.params import param_counts
    from llmsim.engine.split import resolve_split

    sc = load(None, registry, DSV3)
    sp = resolve_split(sc)
    # etp x ep x edp = tp x cp x dp = 64: etp = min(tp 2, 64 / 64) = 1, one replica of each expert
    assert sp.ep_folded and (sp.expert_tp, int(sp.expert_dp)) == (1, 1)
    rec = record(sc)
    assert rec["ep"] == 64 and rec["dp"] == 32 and rec["step_time_s"] > 0
    # the fullest stage holds ceil(61 / 16) = 4 of the 61 layers; a device holds 256 / 64 = 4 whole experts
    # of each of its MoE layers (etp 1): 4/61 x 58 MoE layers x 256 x 3 x 7168 x 2048 / 64 parameters
    c = param_counts(sc.model)
    assert c.expert == 3 * 7168 * 2048
    from llmsim.engine.params import local_params

    _, expert = local_params(sc.model, 4, 16, 2, 64, sp.expert_tp)
    assert expert == pytest.approx(4 / 61 * 58 * 256 * 3 * 7168 * 2048 / 64)


def test_expert_parallelism_that_divides_neither_dp_nor_the_stage_is_refused(registry):
    from llmsim.engine.errors import DesignError

    # ep 128 divides the 256 experts but neither dp 32 nor the stage's tp x dp = 64 ranks
    with pytest.raises(DesignError, match=r"dp \(32\) is not divisible by ep \(128\).*folded over tp x cp x dp"):
        record(load(None, registry, [*DSV3[:-3], "parallel.ep=128", *DSV3[-2:]]))


def test_folded_experts_keep_replicas_when_the_stage_has_more_ranks(registry):
    from llmsim.engine.split import resolve_split

    # tp 2 x dp 24 = 48 ranks per stage, ep 16: etp 2 would need 32 | 48 (no), etp 1 needs 16 | 48: each
    # expert whole on one rank, 48 / 16 = 3 replicas of it; the 16 ep ranks are consecutive (etp
    # innermost), i.e. two DGX H100 nodes of 8, so the all-to-all crosses InfiniBand
    sc = load(None, registry, ["model=deepseek-v3", "system.num_devices=768", "parallel.tp=2", "parallel.pp=16",
                               "parallel.ep=16", "workload.global_batch_size=1536", "workload.seq_len=4096"])
    sp = resolve_split(sc)
    assert sp.ep_folded and sp.expert_tp == 1 and int(sp.expert_dp) == 3
    assert record(sc)["ep_collective"].endswith("on nvlink+infiniband")


@pytest.mark.parametrize("model, pp, fullest, last", [
    # GPT-MoE-1.8T's 120 layers on 32 stages (the GB200 FP4 best split of sweeps/a100-to-b200.yaml):
    # 24 stages of 4 and 8 of 3 = 120, fuller stages first, so the last holds 3 (not 120 - 31 x 4 = -4)
    ("gpt-moe-1.8t", 32, 4, 3),
    # Llama 3 405B's 126 layers on 8 stages: 6 of 16 and 2 of 15
    ("llama3-405b", 8, 16, 15),
    ("llama3-70b", 2, 40, 40),  # even: every stage full
])
def test_uneven_pipelines_give_the_last_stage_its_share(registry, model, pp, fullest, last):
    from llmsim.engine.split import resolve_split

    sp = resolve_split(load(None, registry, [f"model={model}", f"parallel.pp={pp}", "parallel.tp=1",
                                             f"system.num_devices={pp}", f"workload.global_batch_size={pp}"]))
    assert (sp.layers_per_stage, sp.last_layers) == (fullest, last)


def test_moe_layer_frequency_alternates_dense_and_expert_layers(registry):
    # Mixtral 8x7B with one MoE layer in two (as Llama 4 Maverick alternates them): 16 MoE layers of 32.
    # Its dense FFN is the expert's width (14336), so each dense layer drops 7 experts and the router:
    # 16 x (7 x expert + router) parameters fewer; the expert all-to-all runs in half the layers
    from llmsim.engine.params import param_counts
    from llmsim.engine.training import estimate_training

    base = ["model=mixtral-8x7b", "system.num_devices=64", "parallel.tp=2", "parallel.pp=1", "parallel.ep=8",
            "workload.global_batch_size=128", "workload.seq_len=4096"]
    every, alternate = (load(None, registry, [*base, f"model.moe.layer_frequency={n}"]) for n in (1, 2))
    assert (every.model.moe_layers, alternate.model.moe_layers) == (32, 16)
    c1, c2 = param_counts(every.model), param_counts(alternate.model)
    assert c1.expert == c1.dense_mlp
    assert c2.total == pytest.approx(c1.total - 16 * (7 * c1.expert + c1.router), rel=1e-12)
    e1, e2 = estimate_training(every), estimate_training(alternate)
    assert e2["ep_comm_time_s"] == pytest.approx(e1["ep_comm_time_s"] / 2, rel=1e-12)


def test_microbatch_auto_picks_the_fastest_divisor_that_fits(registry):
    # Megatron-Core's 32B weak-scaling row (README table): tp 8 on 384 H100, global batch 192, so each of
    # the 48 data-parallel ranks runs 192 / 48 = 4 sequences: microbatch 1, 2 or 4
    from llmsim.study.auto import microbatch_sizes

    base = ["model=gpt3-175b", "model.layers=48", "model.hidden=7168", "model.heads=56", "model.kv_heads=56",
            "model.ffn_hidden=28672",
            "system.accelerator=h100-sxm", "system.network=dgx-h100", "system.num_devices=384", "parallel.tp=8",
            "parallel.pp=1", "workload.seq_len=4096", "workload.global_batch_size=192"]
    sc = load(None, registry, [*base, "parallel.microbatch_size=auto"])
    assert microbatch_sizes(sc) == [1, 2, 4]
    chosen = record(sc)
    each = {m: record(load(None, registry, [*base, f"parallel.microbatch_size={m}"])) for m in (1, 2, 4)}
    fitting = {m: r["tokens_per_s"] for m, r in each.items() if r["fits_in_memory"]}
    best = max(fitting, key=fitting.get)
    assert chosen["microbatch_size"] == best and chosen["tokens_per_s"] == each[best]["tokens_per_s"]
    # one microbatch of 4 gives the data-parallel reduce-scatter the whole backward to hide under, where
    # microbatch 1 leaves it the last of four microbatches' backward (Megatron-LM no_sync until the last)
    assert best == 4 and each[4]["dp_comm_exposed_time_s"] < each[1]["dp_comm_exposed_time_s"]


def test_estimate_says_which_microbatch_it_picked():
    r = run_cli("estimate", "--set", "parallel.microbatch_size=auto", "--format", "json")
    assert r.returncode == 0, r.stderr
    # the default scenario: 256 sequences over dp 4 = 64 per rank, so the divisors of 64
    assert "microbatch_size auto -> " in r.stderr and "of 1, 2, 4, 8, 16, 32, 64)" in r.stderr


def test_microbatch_auto_in_a_sweep_matches_estimate_and_the_listed_values(tmp_path):
    # 64 sequences over dp 1 (tp 8 x pp 2 on 16 devices): microbatch 1, 2, 4, ... 64, each point its own
    auto = _sweep_csv(tmp_path, "tp: 8, pp: 2, microbatch_size: auto", "  parallel.zero_stage: [1, 3]\n")
    listed = _sweep_csv(tmp_path, "tp: 8, pp: 2", "  parallel.zero_stage: [1, 3]\n"
                        "  parallel.microbatch_size: [1, 2, 4, 8, 16, 32, 64]\n")
    for zero, row in auto.set_index("zero_stage").iterrows():
        fit = listed[(listed.zero_stage == zero) & listed.fits_in_memory.astype(bool)]
        best = fit.loc[fit.tokens_per_s.idxmax()]
        assert row.microbatch_size == best.microbatch_size and row.tokens_per_s == best.tokens_per_s
    # estimate's one-point search picks what the sweep's row did
    r = run_cli("estimate", "--model", "llama3-8b", "--devices", "16", "--tp", "8", "--pp", "2",
                "--global-batch-size", "64", "--seq-len", "4096", "--microbatch-size", "auto", "--format", "json")
    assert r.returncode == 0, r.stderr
    import json

    one = json.loads(r.stdout)
    row = auto.set_index("zero_stage").loc[one["zero_stage"]]
    assert one["microbatch_size"] == row.microbatch_size and one["tokens_per_s"] == row.tokens_per_s


def test_a_megatron_benchmark_without_its_microbatch_takes_the_fastest_that_fits(registry):
    # Megatron has no default --micro-batch-size; a benchmark table that omits it was run at a tuned one
    from llmsim.validation import runs

    items, _ = runs.cases(registry, (runs.TRAINING,))
    case = next(c for c in items if c.rec["id"] == "mcore_r080_h100_weak_32b")
    assert case.scenario.parallel.microbatch_size == "auto"
    assert any("microbatch not stated: auto" in n for n in case.notes)
    # records that state it keep it (Korthikanti et al. 2022: microbatch 1)
    stated = next(c for c in items if c.rec["id"] == "korthikanti_t5_530b_selective_sp")
    assert stated.scenario.parallel.microbatch_size == 1


def test_the_microbatch_flag_takes_auto_and_names_itself_on_bad_input():
    r = run_cli("estimate", "--microbatch-size", "auto", "--format", "json")
    assert r.returncode == 0 and "microbatch_size auto -> " in r.stderr
    r = run_cli("estimate", "--microbatch-size", "many")
    assert r.returncode == 2 and r.stderr.startswith("llmsim: error: --microbatch-size many: parallel.microbatch_size")


def test_a_sweeps_constraints_steer_its_auto_microbatch(tmp_path):
    # llama3-8b on 16 H100 at tp 2, 64 sequences: dp 8, 8 sequences a rank, so microbatch 1, 2, 4 or 8.
    # Unconstrained the fastest that fits is above 2; under "microbatch_size <= 2" each row takes the fastest
    # of 1 and 2 and stays feasible (it was refused for the constraint before), and is slower
    parallel, grid = "tp: 2, pp: 1, microbatch_size: auto", "  parallel.recompute: [selective, full]\n"
    free = _sweep_csv(tmp_path, parallel, grid)
    bounded = _sweep_csv(tmp_path, parallel, grid, "constraints: [microbatch_size <= 2]\n")
    assert (free.microbatch_size > 2).all() and free.infeasible_reason.isna().all()
    assert (bounded.microbatch_size <= 2).all() and bounded.infeasible_reason.isna().all()
    assert (bounded.tokens_per_s < free.tokens_per_s).all()
