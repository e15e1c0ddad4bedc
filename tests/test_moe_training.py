"""MoE training as frameworks run it (issue 18): routing operators, GShard einsum dispatch, expert
GEMM launches and the all-to-all overlap modes, worked by hand."""

import dataclasses

import pytest

from llmsim.engine import calibration as cal
from llmsim.engine.compute import layer_ops
from llmsim.engine.training import estimate_training
from llmsim.study.records import load

MIXTRAL = ["model=mixtral-8x7b", "system.num_devices=64", "parallel.tp=1", "parallel.pp=1", "parallel.ep=8",
           "parallel.microbatch_size=1", "workload.seq_len=4096", "workload.global_batch_size=64"]


def _ops(registry, *extra, **kw):
    sc = load(None, registry, MIXTRAL + list(extra))
    return {op.name: op for op in layer_ops(sc.model, 1, 4096, 1, 1, False, "bf16", True, 8, **kw)}


def test_einsum_dispatch_is_a_dense_gemm_over_the_capacity_slots(registry):
    # Mixtral 8x7B, one 4,096-token sequence, capacity factor 1.25: E x C = 4096 x 2 x 1.25 = 10,240 slots;
    # dispatch = 2 x 4096 x 10240 x 4096 = 3.436e11 FLOPs (84 MFLOP a token), combine the same; the expert
    # up-projections (2 x 14336 wide, gated) are 2 x (4096 x 2 x 1.25) x 28672 x 4096 = 2.405e12, with the
    # down-projection 3.608e12: the einsums add 2 x 3.436e11 / 3.608e12 = 19% of the expert work
    ops = _ops(registry, "model.moe.capacity_factor=1.25", moe_dispatch="einsum")
    assert ops["moe_dispatch"].flops == pytest.approx(2 * 4096 * 10240 * 4096)
    assert ops["moe_combine"].flops == pytest.approx(2 * 4096 * 10240 * 4096)
    experts = ops["experts_up"].flops + ops["experts_down"].flops
    assert experts == pytest.approx(2 * 10240 * 3 * 14336 * 4096)
    assert "permute" not in ops
    # backward: the dispatch needs only its input gradient, the combine its input and weight gradients
    assert ops["moe_dispatch"].bwd_ratio == 1.0 and ops["moe_combine"].bwd_ratio == 2.0


def test_permutation_moves_the_routed_rows_twice_with_expert_parallelism(registry):
    # dropless: 4,096 tokens x top-2 = 8,192 routed rows of 4,096 x 2 B; with ep > 1 the chunks are sorted
    # by local expert again: permute reads and writes 2 x 8192 x 4096 x 2 B x 2 = 268 MB; unpermute reads
    # the rows and writes the tokens, 2 x (8192 + 4096) x 4096 x 2 B = 201 MB
    ops = _ops(registry)
    assert ops["permute"].bytes == pytest.approx(2 * 8192 * 4096 * 2 * 2)
    assert ops["unpermute"].bytes == pytest.approx(2 * (8192 + 4096) * 4096 * 2)
    assert ops["router_topk"].bytes == pytest.approx(4096 * 8 * 6 * 2)  # fp32 logits: read 2x, write 1x


def test_serving_engines_permute_only_their_own_experts_rows(registry):
    # tp 8 sharing the tokens, ep 8 inside it (expert tp 1): 4,096 tokens x top-2 = 8,192 routed rows, of
    # which a rank's one expert gets 8192 x 1 / 8 = 1,024, gathered once (no all-to-all, no second sort):
    # permute 1024 x 4096 x 2 B read + written = 16.8 MB; unpermute reads them and writes the 4,096 tokens,
    # (1024 + 4096) x 4096 x 2 B = 41.9 MB (TensorRT-LLM runMoe stops at num_valid_tokens_ptr)
    sc = load(None, registry, MIXTRAL)
    ops = {op.name: op for op in layer_ops(sc.model, 1, 4096, 8, 1, False, "bf16", True, 8, expert_tp=1,
                                           moe_dispatch="local")}
    assert ops["permute"].bytes == pytest.approx(1024 * 4096 * 2 * 2)
    assert ops["unpermute"].bytes == pytest.approx((1024 + 4096) * 4096 * 2)
    # the expert GEMMs run those 1,024 rows sized by the busiest expert (cal.MOE_LOAD_IMBALANCE):
    # 2 x 1024 x imbalance x (3 x 14336) x 4096 FLOPs
    assert ops["experts_up"].flops + ops["experts_down"].flops == pytest.approx(
        2 * 1024 * cal.MOE_LOAD_IMBALANCE * 3 * 14336 * 4096)


def test_training_launches_one_expert_gemm_per_local_expert(registry):
    # ep 8 of 8 experts: one local expert, one kernel; ep 2: four local experts, four kernels each pass
    assert _ops(registry, gemm_per_expert=True)["experts_up"].kernels == 1
    sc = load(None, registry, MIXTRAL)
    ops = {op.name: op for op in layer_ops(sc.model, 1, 4096, 1, 1, False, "bf16", True, 2, gemm_per_expert=True)}
    assert ops["experts_up"].kernels == 4 and ops["experts_down"].kernels == 4
    assert _ops(registry)["experts_up"].kernels == 1  # serving engines: one fused MoE kernel


def test_overlapping_the_all_to_all_never_costs_more(registry):
    # exposed (Megatron-Core's default) >= under the shared experts >= under another microbatch's layer;
    # Mixtral has no shared experts, so that mode exposes everything: the same as none
    times = {mode: estimate_training(load(None, registry, MIXTRAL + [f"parallel.moe_comm_overlap={mode}"]))
             for mode in ("none", "shared_experts", "batch")}
    ep = {k: v["ep_comm_time_s"] for k, v in times.items()}
    assert ep["shared_experts"] == pytest.approx(ep["none"])
    assert 0 < ep["batch"] < ep["none"]
    # hidden whole under ~4x its length of layer compute: what remains is the compute's slowdown beside it
    x = cal.OVERLAP_COMPUTE_SLOWDOWN
    assert ep["batch"] == pytest.approx(ep["none"] * x / (1 + x), rel=0.02)
    # one microbatch: the gradient reduce outlasts the backward, so most of what the overlap saves the
    # data-parallel reduce takes back (its window shrinks by the hidden all-to-all; only the slowdown floor
    # x/(1+x) of the bucketed reduce stays hidden); with 8 microbatches the step gets shorter
    saved = ep["none"] - ep["batch"]
    taken_back = times["batch"]["dp_comm_exposed_time_s"] - times["none"]["dp_comm_exposed_time_s"]
    assert times["batch"]["step_time_s"] <= times["none"]["step_time_s"]
    assert 0.8 * saved <= taken_back <= saved * (1 + 1e-12)  # all of it, to rounding, where nothing stays hidden
    eight = [estimate_training(load(None, registry, MIXTRAL + ["workload.global_batch_size=512",
                                                               f"parallel.moe_comm_overlap={mode}"]))
             for mode in ("none", "batch")]
    assert eight[1]["step_time_s"] < eight[0]["step_time_s"]


def test_shared_experts_hide_the_dispatch(registry):
    # DeepSeek-V3's shared expert runs beside the dispatch and combine: less exposed than none
    args = ["model=deepseek-v3", "system.num_devices=256", "parallel.tp=1", "parallel.pp=16", "parallel.ep=16",
            "workload.seq_len=4096", "workload.global_batch_size=256", "workload.precision=fp8"]
    none = estimate_training(load(None, registry, args))["ep_comm_time_s"]
    shared = estimate_training(load(None, registry, args + ["parallel.moe_comm_overlap=shared_experts"]))
    assert shared["ep_comm_time_s"] < none


def test_goodput_ranks_a_search(registry):
    from conftest import run_cli

    r = run_cli("search", "--model", "llama3-8b", "--devices", "64", "--global-batch-size", "64",
                "--objective", "goodput_tokens_per_s", "--top", "3", "--jobs", "1", "--format", "csv")
    assert r.returncode == 0, r.stderr
    import io

    import pandas as pd
    rows = pd.read_csv(io.StringIO(r.stdout))
    assert rows["goodput_tokens_per_s"].is_monotonic_decreasing
    assert (rows["goodput_tokens_per_s"] <= rows["tokens_per_s"]).all()


def test_dataclass_replace_keeps_moe_keys(registry):
    sc = load(None, registry, MIXTRAL + ["parallel.moe_dispatch=einsum"])
    assert dataclasses.replace(sc.parallel).moe_dispatch == "einsum"
