"""Training model: hand-worked expectations and invariants."""

import dataclasses

import pytest

from llmsim.engine import calibration as cal
from llmsim.engine.errors import DesignError
from llmsim.engine.memory import activation_bytes_per_layer, inflight_microbatches, state_bytes
from llmsim.engine.training import estimate_training, model_flops_per_token
from llmsim.engine.types import Model
from llmsim.spec.convert import model_values
from llmsim.study.records import load


@pytest.fixture(scope="module")
def default(registry):
    return load(None, registry, [])


def test_gpt3_flops_per_step_matches_narayanan_eq3(registry):
    # Narayanan et al. 2021 eq. 3 without the recompute forward (72 instead of 96):
    # F = 72 * B * s * l * h^2 * (1 + s/(6h) + V/(12*l*h)), B = 1536, s = 2048, l = 96, h = 12288,
    # V = 50257 -> 72*1536*2048*96*12288^2 = 3.2829e18 * (1 + 0.027778 + 0.003551) = 3.3858e18.
    sc = load(None, registry, ["model=gpt3-175b", "system.num_devices=1024", "parallel.pp=8",
                               "workload.seq_len=2048", "workload.global_batch_size=1536"])
    flops = model_flops_per_token(sc) * 1536 * 2048
    # llmsim also counts biases and norms (GPT-3 has them) and uses 6*N with N from the real shape:
    assert flops == pytest.approx(3.3858e18, rel=0.01)


def test_state_memory_7b_zero_stages():
    # Megatron-LM dist_optimizer.md, bytes per parameter (d = data-parallel ranks): bf16 parameters with fp32
    # gradients 18, distributed 6 + 12/d; fp16 parameters and gradients 20, distributed 4 + 16/d.
    # 7e9 params, dp = 8, bf16: ZeRO-0 18 B = 126 GB; ZeRO-1 2 + 4 + 12/8 = 7.5 B = 52.5 GB;
    # ZeRO-2 2 + (4 + 12)/8 = 4 B = 28 GB; ZeRO-3 18/8 = 2.25 B = 15.75 GB.
    expected = {0: 126e9, 1: 52.5e9, 2: 28e9, 3: 15.75e9}
    for stage, total in expected.items():
        assert state_bytes(7e9, 8, stage).total == pytest.approx(total)
    # fp16: ZeRO-0 20 B = 140 GB; ZeRO-1 2 + 2 + 16/8 = 6 B = 42 GB
    assert state_bytes(7e9, 8, 0, precision="fp16").total == pytest.approx(140e9)
    assert state_bytes(7e9, 8, 1, precision="fp16").total == pytest.approx(42e9)


def test_state_memory_grad_dtype_and_optimizer_states():
    # 7e9 params, dp = 8, ZeRO-1 (weights 2 B, gradients unsharded, optimizer / 8):
    # bf16 gradients, fp32 states: 2 + 2 + (12 + 4 fp32 gradient-shard copy)/8 = 6 B = 42 GB (Megatron, as fp16)
    # bf16 gradients, fp32-remainders (Apex store_param_remainders): 2 + 2 + 10/8 = 5.25 B = 36.75 GB
    # bf16 gradients, bf16 states (Apex optim.dtype bf16, no master): 2 + 2 + 4/8 = 4.5 B = 31.5 GB
    # fp32 gradients under fp16 (no copy needed): 2 + 4 + 12/8 = 7.5 B = 52.5 GB
    assert state_bytes(7e9, 8, 1, grad_dtype="bf16").total == pytest.approx(42e9)
    rem = state_bytes(7e9, 8, 1, grad_dtype="bf16", optimizer_states="fp32-remainders")
    assert (rem.gradients, rem.optimizer) == (pytest.approx(14e9), pytest.approx(8.75e9))
    assert state_bytes(7e9, 8, 1, grad_dtype="bf16", optimizer_states="bf16").total == pytest.approx(31.5e9)
    assert state_bytes(7e9, 8, 1, precision="fp16", grad_dtype="fp32").total == pytest.approx(52.5e9)
    # auto is today's accounting: identical to leaving the arguments out
    assert state_bytes(7e9, 8, 2, grad_dtype="auto", optimizer_states="fp32") == state_bytes(7e9, 8, 2)


def test_bf16_gradients_halve_grads_gb(registry):
    # llama3-8b (N = 8,030,261,248) on one H100: auto keeps 4 B fp32 main gradients = 32.121 GB, bf16 2 B =
    # 16.061 GB; with fp32-remainders the optimizer holds 10 B = 80.303 GB instead of 12 B = 96.363 GB, and
    # the Adam step moves 3*2 + 2*(2 + 10) = 30 B per parameter instead of 42
    n = 8_030_261_248
    base = ["model=llama3-8b", "system.num_devices=1", "parallel.tp=1", "parallel.pp=1",
            "workload.global_batch_size=1", "workload.seq_len=1024"]
    auto = estimate_training(load(None, registry, base))
    bf16 = estimate_training(load(None, registry, [*base, "parallel.grad_reduce_dtype=bf16",
                                                   "parallel.optimizer_states=fp32-remainders"]))
    assert auto["grads_gb"] == pytest.approx(n * 4 / 1e9) and bf16["grads_gb"] == pytest.approx(n * 2 / 1e9)
    assert auto["optimizer_gb"] == pytest.approx(n * 12 / 1e9) and bf16["optimizer_gb"] == pytest.approx(n * 10 / 1e9)
    assert auto["memory_per_device_gb"] - bf16["memory_per_device_gb"] == pytest.approx(n * 4 / 1e9)
    assert bf16["optimizer_time_s"] / auto["optimizer_time_s"] == pytest.approx(30 / 42)


def test_recipe_settings_cite_a_source_and_name_real_records():
    import yaml

    from llmsim.validation import records as val
    ids = {r["id"] for r in val.load_records()}
    with open(val.RECIPES, encoding="utf-8") as fh:
        entries = yaml.safe_load(fh)
    assert entries and all(e["id"] in ids for e in entries)
    for e in entries:
        sections = {k: v for k, v in e.items() if k != "id"}
        assert sections and set(sections) <= {"model", "system", "parallel", "workload"}, e["id"]
        for section in sections.values():
            for key, setting in section.items():
                assert set(setting) == {"value", "source"} and len(setting["source"]) > 20, (e["id"], key)


GPT_22B = Model("gpt-22b", 48, 6144, 24576, 64, 64, 96, 51200, "gelu", False, True)


def test_korthikanti_activation_memory_per_layer():
    # Korthikanti et al. 2022 eq. 1-2 and table 2, t = 1, with dropout, no flash attention:
    # none: s*b*h*(34 + 5*a*s/h); selective: 34*s*b*h; full: 2*s*b*h.
    s, b, h, a = 2048, 4, 6144, 64
    sbh = s * b * h
    args = dict(m=GPT_22B, b=b, s=s, tp=1, cp=1, sp=False, flash=False, dropout=True)
    assert activation_bytes_per_layer(recompute="none", **args) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert activation_bytes_per_layer(recompute="selective", **args) == pytest.approx(34 * sbh)
    assert activation_bytes_per_layer(recompute="full", **args) == pytest.approx(2 * sbh)
    # with tensor + sequence parallelism every term is divided by t (Korthikanti eq. 5): 34*sbh/t
    args.update(tp=8, sp=True)
    assert activation_bytes_per_layer(recompute="selective", **args) == pytest.approx(34 * sbh / 8)


def test_bubble_fraction(default, registry):
    # 1F1B: bubble / ideal = (p - 1) / m; interleaved: (p - 1) / (v * m) (Narayanan eq. 1-2). The ideal
    # time of one microbatch is rebuilt from the other columns, not from the bubble: its compute
    # (compute_time_s less the optimizer step, over m) plus its exposed tp/cp/ep/pp communication over m.
    for v in (1, 2):
        sc = load(None, registry, ["parallel.pp=4", "parallel.tp=8", f"parallel.virtual_stages={v}",
                                   "workload.global_batch_size=64"])
        out = estimate_training(sc)
        m = out["microbatches"]
        assert m == 64 // 2  # dp = 64 devices / (tp 8 * pp 4) = 2
        comm = sum(out[f"{d}_comm_time_s"] for d in ("tp", "cp", "ep", "pp"))
        per_mb = (out["compute_time_s"] - out["optimizer_time_s"] + comm) / m
        assert out["bubble_time_s"] / (m * per_mb) == pytest.approx(3 / (v * m), rel=1e-9)


def test_inflight_microbatches():
    assert inflight_microbatches(8, 64, 1) == 8  # first stage holds p microbatches
    assert inflight_microbatches(8, 4, 1) == 4  # never more than exist
    assert inflight_microbatches(4, 64, 2) == pytest.approx(4 * (1 + 3 / 8))
    # last stage: one microbatch under 1F1B; interleaved ((v-1)*p + 1) chunks of 1/v: (1*4 + 1)/2 = 2.5
    assert inflight_microbatches(8, 64, 1, last=True) == 1
    assert inflight_microbatches(4, 64, 2, last=True) == pytest.approx(2.5)


def test_last_stage_logits_make_it_the_largest(registry):
    # llama3-8b (h = 4096, V = 128256) on pp = 4, tp = 1, s = 8192, b = 1, full recompute, m = 16.
    # Per layer 2*s*b*h = 67,108,864 B. First stage: 8 layers * 4 in flight = 2,147,483,648 B.
    # Last stage: 8 layers * 1 in flight + fp32 logits 4*s*b*V = 4,202,692,608 -> 4,739,563,520 B.
    # Both hold 8 layers (218,112,000 params each) + one V*h matrix (525,336,576) = 2,270,232,576 params:
    # 2 + 4 + 12 B = 4.5405 + 9.0809 + 27.2428 GB. Last: 4.7396 * 1.1 + 40.8642 + 2 = 48.078 GB.
    sc = load(None, registry, ["model=llama3-8b", "system.num_devices=4", "parallel.tp=1", "parallel.pp=4",
                               "parallel.recompute=full", "workload.global_batch_size=16"])
    out = estimate_training(sc)
    assert out["memory_stage"] == "last"
    assert out["activations_gb"] == pytest.approx(4_739_563_520 * 1.1 / 1e9)
    assert out["grads_gb"] == pytest.approx(2_270_232_576 * 4 / 1e9)
    assert out["memory_per_device_gb"] == pytest.approx(48.078, abs=1e-3)
    # with selective recomputation the first stage's 4 in-flight microbatches dominate again
    sel = estimate_training(load(None, registry, ["model=llama3-8b", "system.num_devices=4", "parallel.tp=1",
                                                  "parallel.pp=4", "workload.global_batch_size=16"]))
    assert sel["memory_stage"] == "first"


def test_capacity_factor_pads_expert_rows():
    # top-2 of 8 experts, h = 1024, expert f = 2048 (SwiGLU), s*b = 1024 tokens, tp = 1. Expert rows keep
    # 2*rows*h (dispatched) + 2*rows*f*2 (activation input) + 2*rows*f (down input) = 14,336 B per row.
    # Dropless: rows = 1024*2*1.1 = 2252.8; capacity factor 1.25 pads every expert: rows = 1024*2*1.25 = 2560,
    # i.e. (2560 - 2252.8) * 14336 = 4,404,019.2 B more; capacity factor 1.0: (2048 - 2252.8) * 14336 less.
    from llmsim.engine.types import MoE
    moe = MoE(experts=8, top_k=2, shared_experts=0, expert_ffn_hidden=2048, first_dense_layers=0,
              capacity_factor=None)
    m = Model("moe", 2, 1024, 4096, 8, 8, 128, 32000, "swiglu", False, False, moe=moe)
    args = dict(b=1, s=1024, tp=1, cp=1, sp=False, recompute="selective", moe_layer=True)
    dropless = activation_bytes_per_layer(m, **args)
    for cf, rows in ((1.25, 2560), (1.0, 2048)):
        capped = dataclasses.replace(m, moe=dataclasses.replace(moe, capacity_factor=cf))
        assert activation_bytes_per_layer(capped, **args) - dropless == pytest.approx((rows - 2252.8) * 14336)


def test_default_scenario_outputs(default):
    out = estimate_training(default)
    assert 0 < out["mfu"] < 1 and out["fits_in_memory"]
    assert out["tokens_per_s"] == pytest.approx(256 * 8192 / out["step_time_s"])
    parts = (out["compute_time_s"] + out["exposed_comm_time_s"] + out["bubble_time_s"] + out["straggler_time_s"]
             + out["overhead_time_s"])
    assert parts == pytest.approx(out["step_time_s"])


@pytest.mark.parametrize("override, message", [
    (["parallel.tp=3"], "not divisible by tp*pp*cp"),
    (["model=llama2-13b", "parallel.tp=16", "parallel.pp=1"], "heads (40) are not divisible by tp (16)"),
    (["parallel.pp=64", "parallel.tp=1", "parallel.virtual_stages=2"], "exceeds layers"),
    (["workload.global_batch_size=7"], "global_batch_size (7) is not divisible"),
    (["parallel.ep=2"], "needs a mixture-of-experts model"),
])
def test_impossible_splits_are_errors(registry, override, message):
    sc = load(None, registry, override)
    with pytest.raises(DesignError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        estimate_training(sc)


def test_uneven_pipeline_and_replicated_kv_are_not_errors(registry):
    # Llama 3 405B: 126 layers on 16 stages; 8 KV heads under tp = 16 (replicated)
    sc = load(None, registry, ["model=llama3-405b", "system.num_devices=2048", "parallel.tp=16",
                               "parallel.pp=16", "workload.global_batch_size=512"])
    out = estimate_training(sc)
    assert out["layers_per_stage"] == 8 and out["step_time_s"] > 0


def test_moe_model_runs_with_expert_parallelism(registry):
    sc = load(None, registry, ["model=mixtral-8x7b", "parallel.tp=2", "parallel.pp=1", "parallel.ep=8",
                               "workload.seq_len=4096", "workload.global_batch_size=256"])
    out = estimate_training(sc)
    assert out["ep_comm_time_s"] > 0 and 0 < out["mfu"] < 1


def test_free_communication_scales_linearly_with_dp(registry, monkeypatch):
    monkeypatch.setattr(cal, "STEP_OVERHEAD_S", 0.0)
    rates = []
    for n in (64, 128, 256):
        # ZeRO-0: the optimizer shard (and its time) does not shrink with dp
        # identical devices (no speed spread): nothing waits for a straggler
        sc = load(None, registry, [f"system.num_devices={n}", "parallel.tp=8", "parallel.pp=1", "parallel.zero_stage=0",
                                   f"workload.global_batch_size={n * 2}", "reliability.device_speed_cv=0"])
        net = sc.network
        fast = dataclasses.replace(net, tiers=tuple(dataclasses.replace(t, bw_bytes_per_s=1e30, latency_s=0.0)
                                                    for t in net.tiers))
        rates.append(estimate_training(dataclasses.replace(sc, network=fast))["tokens_per_s"])
    assert rates[1] == pytest.approx(2 * rates[0], rel=1e-9) and rates[2] == pytest.approx(4 * rates[0], rel=1e-9)


def test_capacity_factor_pads_expert_gemms_and_all_to_all(registry):
    # The padded rows are computed and dispatched too. Expert rows per device: 1024 tokens * top-2 * 1.1
    # (dropless, busiest expert) = 2252.8; capacity factor 1.25: 2560 (x 1.1364); 1.0: 2048 (x 0.9091).
    from llmsim.engine.compute import layer_ops
    from llmsim.engine.types import MoE
    moe = MoE(experts=8, top_k=2, shared_experts=0, expert_ffn_hidden=2048, first_dense_layers=0,
              capacity_factor=None)
    m = Model("moe", 2, 1024, 4096, 8, 8, 128, 32000, "swiglu", False, False, moe=moe)

    def expert_flops(model):
        return sum(op.flops for op in layer_ops(model, 1, 1024, 1, 1, False, "bf16", True) if op.name == "experts_up")

    for cf, rows in ((1.25, 2560), (1.0, 2048)):
        capped = dataclasses.replace(m, moe=dataclasses.replace(moe, capacity_factor=cf))
        assert expert_flops(capped) / expert_flops(m) == pytest.approx(rows / 2252.8)
    # All-to-all: Mixtral 8x7B, ep 8 across nodes (tp 1, 64 GPUs): dispatch and combine move
    # tokens * top-2 * h * 2 B, times the capacity factor when padded: 1.25x the bytes. The messages are
    # large (8 * 4,096 tokens * 2 * 4096 * 2 B = 537 MB per microbatch, ~1.5 ms on NVLink against a few
    # 10 us of latency), so time scales with bytes to ~1%.
    args = ["model=mixtral-8x7b", "system.num_devices=64", "parallel.tp=1", "parallel.pp=1", "parallel.ep=8",
            "parallel.microbatch_size=8", "workload.seq_len=4096", "workload.global_batch_size=512"]
    base = estimate_training(load(None, registry, args))
    padded = estimate_training(load(None, registry, args + ["model.moe.capacity_factor=1.25"]))
    assert padded["ep_comm_time_s"] / base["ep_comm_time_s"] == pytest.approx(1.25, rel=0.01)


def _moe_model():
    from llmsim.engine.types import MoE
    moe = MoE(experts=8, top_k=2, shared_experts=0, expert_ffn_hidden=2048, first_dense_layers=0,
              capacity_factor=1.0)
    return Model("moe", 2, 1024, 4096, 8, 8, 128, 32000, "swiglu", False, False, moe=moe)


def test_fp8_training_keeps_gemm_only_inputs_in_one_byte():
    # MoE layer, h = 1024, s*b = 1024 tokens (sbh = 1,048,576), top-2 at capacity factor 1: rows = 2048,
    # expert f = 2048, tp = 1, flash. The tensors kept only for an FP8 GEMM halve in FP8 (arXiv
    # 2603.07685 sec. 4.1.3): QKV input (2 sbh = 2,097,152), dispatched tokens (2*rows*h = 4,194,304) and
    # the experts' second-linear input (2*rows*f = 8,388,608): 14,680,064 B of 16-bit, so FP8 keeps
    # 7,340,032 B less; FP4 (0.5625 B) keeps 0.5625/2 of them. The router's input (a 16-bit GEMM) stays.
    args = dict(m=_moe_model(), b=1, s=1024, tp=1, cp=1, sp=False, recompute="selective", moe_layer=True)
    bf16 = activation_bytes_per_layer(**args)
    assert bf16 - activation_bytes_per_layer(precision="fp8", **args) == pytest.approx(7_340_032)
    assert bf16 - activation_bytes_per_layer(precision="fp4", **args) == pytest.approx(14_680_064 * (1 - 0.5625 / 2))


def test_recompute_modules_drop_what_they_recompute():
    # Same MoE layer in bf16: layernorm drops the two norm outputs (2 sbh each = 4,194,304 B), moe_act the
    # experts' second-linear input (2*rows*f = 8,388,608 B); together 12,582,912 B.
    args = dict(m=_moe_model(), b=1, s=1024, tp=1, cp=1, sp=False, moe_layer=True)
    sel = activation_bytes_per_layer(recompute="selective", **args)
    assert sel - activation_bytes_per_layer(recompute="selective:layernorm", **args) == pytest.approx(4_194_304)
    assert sel - activation_bytes_per_layer(recompute="selective:moe_act", **args) == pytest.approx(8_388_608)
    both = activation_bytes_per_layer(recompute="selective:layernorm+moe_act", **args)
    assert sel - both == pytest.approx(12_582_912)
    # a dense layer's mlp module keeps the MLP input alone: drops the activation input (2*tok*f*2 with
    # f = 4096: 16,777,216 B) and the second-linear input (2*tok*f = 8,388,608 B); with layernorm too,
    # the two norm outputs go as well (Megatron-Core frees the checkpoint's input): 2 x 2,097,152 B more
    dense = dict(args, moe_layer=False)
    sel = activation_bytes_per_layer(recompute="selective", **dense)
    assert sel - activation_bytes_per_layer(recompute="selective:mlp", **dense) == pytest.approx(25_165_824)
    assert sel - activation_bytes_per_layer(recompute="selective:layernorm+mlp", **dense) == pytest.approx(29_360_128)
    # in FP8 the recomputed MLP keeps its 16-bit checkpoint input (2 sbh = 2,097,152) instead of the FP8
    # copy (sbh = 1,048,576) and drops the 16-bit activation input (16,777,216) and the FP8 down input
    # (tok*f = 4,194,304): 1,048,576 + 16,777,216 + 4,194,304 - 2,097,152 = 19,922,944
    fp8 = dict(dense, precision="fp8")
    assert (activation_bytes_per_layer(recompute="selective", **fp8)
            - activation_bytes_per_layer(recompute="selective:mlp", **fp8)) == pytest.approx(19_922_944)


def test_mla_up_proj_recompute_keeps_the_latents(registry):
    # DeepSeek-V3 (128 heads, qk 128 + 64 rope, v 128; q_lora 1536, kv_lora 512), s*b = 4096 tokens, tp = 1:
    # Q, K, V kept for attention are 2*4096*128*(192 + 192 + 128) = 536,870,912 B; recomputing the
    # up-projections keeps the checkpoint's 16-bit inputs instead, 2*4096*(1536 + 512 + 64) = 17,301,504 B,
    # in FP8 training too
    m = model_values(registry.get("models", "deepseek-v3"))
    for precision in ("bf16", "fp8"):
        args = dict(m=m, b=1, s=4096, tp=1, cp=1, sp=False, moe_layer=True, precision=precision)
        diff = (activation_bytes_per_layer(recompute="selective", **args)
                - activation_bytes_per_layer(recompute="selective:mla_up_proj", **args))
        assert diff == pytest.approx(536_870_912 - 17_301_504)


def test_layernorm_recompute_costs_two_norms_forward(registry):
    # Llama 3 8B on one H100, s = 4096, microbatch 1, global batch 8: 8 microbatches x 32 layers run the
    # two norms' forward again. Each norm reads and writes 4096 x 4096 16-bit values: 67,108,864 B at
    # 3.35e12 B/s x HBM_EFFICIENCY, plus one kernel's KERNEL_OVERHEAD_S.
    base = ["model=llama3-8b", "system.num_devices=1", "system.accelerator=h100-sxm", "parallel.tp=1",
            "parallel.pp=1", "workload.global_batch_size=8", "workload.seq_len=4096", "parallel.zero_stage=0"]
    none = estimate_training(load(None, registry, base + ["parallel.recompute=none"]))
    norm = estimate_training(load(None, registry, base + ["parallel.recompute=selective:layernorm"]))
    t_norm = 67_108_864 / (3.35e12 * cal.HBM_EFFICIENCY) + cal.KERNEL_OVERHEAD_S
    assert norm["compute_time_s"] - none["compute_time_s"] == pytest.approx(8 * 32 * 2 * t_norm, rel=1e-9)
    assert norm["activations_gb"] < none["activations_gb"]


def test_mlp_recompute_repeats_the_mlp_tp_collectives(registry):
    # with tp the recomputed dense MLP runs its all-gather and reduce-scatter again: half the forward's
    # TP time more; full recomputation repeats all of it
    base = ["model=llama3-8b", "system.num_devices=8", "parallel.tp=8", "parallel.pp=1",
            "workload.global_batch_size=8", "workload.seq_len=8192"]
    tp = {r: estimate_training(load(None, registry, base + [f"parallel.recompute={r}"]))["tp_comm_time_s"]
          for r in ("none", "selective:mlp", "full")}
    fwd = tp["full"] - tp["none"]
    assert fwd > 0
    assert tp["selective:mlp"] - tp["none"] == pytest.approx(fwd / 2, rel=1e-9)


def test_context_parallel_ring_hides_under_attention_whatever_is_recomputed(registry):
    # the CP ring's window is core attention's forward and backward (methodology 5.3), not what the
    # recompute setting runs again: none, selective and fine-grained modules expose the same CP time
    base = ["model=llama3-8b", "system.num_devices=8", "parallel.tp=1", "parallel.pp=1", "parallel.cp=2",
            "workload.seq_len=8192", "workload.global_batch_size=128"]
    cp = {r: estimate_training(load(None, registry, base + [f"parallel.recompute={r}"]))["cp_comm_time_s"]
          for r in ("none", "selective", "selective:layernorm")}
    assert cp["none"] == pytest.approx(cp["selective"], rel=1e-12)
    assert cp["none"] == pytest.approx(cp["selective:layernorm"], rel=1e-12)
