"""A row's collective names are the collectives it times (same size, group and path), and the CP ring passes
the K and V a rank holds. Sizes are worked out by hand from the model cards."""

import pytest

from llmsim.engine import training
from llmsim.engine.network.collectives import collective
from llmsim.engine.network.topology import path_of
from llmsim.spec.presets import PresetRegistry
from llmsim.study.records import load, record


def _row(overrides):
    return record(load(None, PresetRegistry(), overrides))


def _name(op, nbytes, sc, stride, ranks):
    r = collective(op, nbytes, path_of(sc.network, stride, ranks))
    return f"{op} {r.algorithm}/{r.protocol} on {r.tiers}"


def test_zero3_names_the_per_layer_reduce_scatter():
    # Llama 3 8B (hidden 4096, 32 heads, 8 KV heads of 128, FFN 14336, vocab 128256, untied):
    # a layer has 4096*4096 (q) + 2*4096*1024 (k, v) + 4096*4096 (o) + 3*4096*14336 (MLP) + 2*4096 (norms)
    # = 218,112,000 parameters; 32 layers + 2 * 128256*4096 (embedding, head) + 4096 (final norm)
    # = 8,030,261,248. FSDP reduce-scatters each of the 32 units' gradients in bf16 (2 bytes):
    # 8,030,261,248 * 2 / 32 = 501,891,328 bytes per collective over dp = 64 ranks, stride 1.
    ov = ["model=llama3-8b", "system.num_devices=64", "parallel.tp=1", "parallel.pp=1", "parallel.zero_stage=3",
          "workload.global_batch_size=64"]
    sc = load(None, PresetRegistry(), ov)
    row = record(sc)
    per_unit = 8_030_261_248 * 2 / 32
    assert row["dp_collective"] == _name("reduce_scatter", per_unit, sc, 1, 64)
    assert row["dp_collective"] == "reduce_scatter ring/ll128 on nvlink+infiniband"
    # the whole model's gradients at once would pick another protocol: the test tells the two apart
    assert _name("reduce_scatter", per_unit * 32, sc, 1, 64) != row["dp_collective"]


def test_expert_parallel_names_the_dispatch_all_to_all():
    # Qwen3-30B-A3B (hidden 2048, top-8 routing, dropless) on 16 H100, ep 16, microbatch 1 of 4,096 tokens:
    # each dispatch sends 4096 tokens * 8 experts * 2048 * 2 bytes = 134,217,728 bytes (not the 16 MiB of one
    # activation tensor, 4096 * 2048 * 2 = 16,777,216, which was named before)
    ov = ["model=qwen3-30b-a3b", "system.num_devices=16", "parallel.tp=1", "parallel.pp=1", "parallel.ep=16",
          "workload.seq_len=4096", "workload.global_batch_size=64"]
    sc = load(None, PresetRegistry(), ov)
    row = record(sc)
    assert row["ep_collective"] == _name("all_to_all", 134_217_728, sc, 1, 16)
    assert row["ep_collective"] == "all_to_all pairwise/simple on nvlink+infiniband"
    assert _name("all_to_all", 16_777_216, sc, 1, 16) == "all_to_all hierarchical/mixed on nvlink+infiniband"


def test_context_parallel_ring_passes_the_replicated_kv_heads(monkeypatch):
    # Llama 3 70B has 8 KV heads of 128: with tp 16 each rank still holds one (Megatron replicates GQA heads
    # when kv_heads < tp). A microbatch of 1 x 8,192 tokens over cp 2 leaves 4,096 tokens per rank, whose
    # K and V are 4096 * 2 * 1 * 128 * 2 bytes = 2,097,152 bytes per ring step (8 / 16 heads would give half).
    sent = []
    real = training.comm_time

    def spy(net, op, nbytes, ranks, stride, path_ranks=None):
        if op == "p2p":
            sent.append(nbytes)
        return real(net, op, nbytes, ranks, stride, path_ranks)

    monkeypatch.setattr(training, "comm_time", spy)
    _row(["model=llama3-70b", "system.num_devices=64", "parallel.tp=16", "parallel.pp=1", "parallel.cp=2",
          "parallel.microbatch_size=1", "workload.seq_len=8192", "workload.global_batch_size=32"])
    assert sent and sent[0] == pytest.approx(2_097_152, rel=0, abs=0)


def test_prefill_workspace_counts_the_kv_heads_a_rank_holds():
    # Llama 3 70B (hidden 8,192, 64 query heads and 8 KV heads of 128, SwiGLU FFN 28,672) at tp 16: a rank
    # holds 64/16 = 4 query heads and one replicated KV head, so Q, K and V are 4*128 + 2*128 = 768 wide
    # (8/16 KV heads would give 640). Per prefill token and layer, 16-bit: 2 * (2*8192 (input, residual)
    # + 768 + 3*28672/16 (gate, up, down intermediate)) = 2 * 22,528 = 45,056 bytes.
    from llmsim.engine.forward import workspace_per_token

    sc = load(None, PresetRegistry(), ["model=llama3-70b"])
    assert workspace_per_token(sc, 16) == 45_056
    # DeepSeek-V3 (MLA: 128 heads, 128 + 64 RoPE query/key width, 128 value width) at tp 8: each rank's
    # 16 heads have a Q of 192 and a K and V of 128 + 128: 16 * (192 + 256) = 7,168 elements
    ds = load(None, PresetRegistry(), ["model=deepseek-v3"])
    f = max(ds.model.ffn_hidden, ds.model.moe.expert_ffn_hidden * ds.model.moe.top_k)
    assert workspace_per_token(ds, 8) == 2 * (2 * 7168 + 7168 + 3 * f / 8)
