"""Attention data-parallel serving (``parallel.attention_dp``; SGLang --enable-dp-attention, TensorRT-LLM
enable_attention_dp): each tp rank runs its own requests' attention with every head and caches only their
keys and values; the MLP and experts run on all the ranks' tokens."""

import numpy as np
import pytest

from llmsim.engine.inference import forward_comm, memory_bytes
from llmsim.engine.kv_capacity import running_limit
from llmsim.engine.network.topology import strides
from llmsim.engine.split import resolve_split
from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.study.records import load, record

DSR1 = ["model=deepseek-r1", "system.accelerator=h200-sxm", "system.network=dgx-h200", "system.num_devices=8",
        "parallel.tp=8", "parallel.pp=1", "parallel.ep=8", "workload.mode=serving", "workload.precision=native",
        "workload.input_len=1024", "workload.output_len=2048", "workload.concurrency=1024",
        "serving.max_seqs=100000"]
ADP = "parallel.attention_dp=true"


def _sc(*overrides):
    return load(None, PresetRegistry(), list(overrides))


def test_each_rank_holds_the_whole_attention_by_hand():
    # DeepSeek-R1 attention per layer (hidden 7168, q_lora 1536, kv_lora 512, rope 64, 128 heads of 128 + 64,
    # v 128): q 7168 x 1536 + 1536 + 1536 x 128 x 192 = 48,760,320; kv 7168 x 576 + 512 + 512 x 128 x 256 =
    # 20,906,496; o 128 x 128 x 7168 = 117,440,512; 187,107,328 a layer. At tp 8 a rank held 1/8 of it; with
    # attention DP all of it: 61 layers x 187,107,328 x 7/8 x 1 byte (FP8) = 9,986,853,632 bytes more
    plain, adp = _sc(*DSR1), _sc(*DSR1, ADP)
    w = [memory_bytes(sc, resolve_split(sc).as_column(), 0, 1024, 2048)["weights"][0] for sc in (plain, adp)]
    assert w[1] - w[0] == pytest.approx(61 * 187_107_328 * 7 / 8, rel=1e-12)


def test_a_rank_caches_only_its_own_requests_keys_and_values():
    # MLA caches one 576-wide latent a token whatever tp, so a request's cache is the same bytes; with
    # attention DP each rank holds 1/8 of the requests: 8 x the requests in the memory the weights leave
    plain, adp = _sc(*DSR1), _sc(*DSR1, ADP)
    lims = [running_limit(sc, resolve_split(sc).as_column(), np.array([1024.0]), np.array([2048.0]))
            for sc in (plain, adp)]
    per_seq = lims[0]["kv_per_seq_bytes"][0]  # per device, without DP: the whole request's cache
    assert lims[1]["kv_per_seq_bytes"][0] == pytest.approx(per_seq / 8)
    assert lims[1]["max_running"][0] == 8 * np.floor(lims[1]["kv_free_bytes"][0] / per_seq)
    assert lims[1]["max_running"][0] > 6 * lims[0]["max_running"][0]  # less the replicated attention


def test_the_mlp_gathers_and_reduce_scatters_instead_of_two_all_reduces():
    # two all-reduces a layer (after attention, after the MLP) become one all-gather of the ranks' tokens and
    # one reduce-scatter of the MLP's output, timed as those collectives: NCCL's ring all-reduce is a
    # reduce-scatter then an all-gather, so the pair costs about one all-reduce (more where the all-reduce
    # has a faster algorithm or protocol of its own), between half and all of the two
    from llmsim.engine.network.groups import group_collectives

    base = ["model=llama3-70b", "system.num_devices=8", "parallel.tp=8", "parallel.pp=1", "workload.mode=serving",
            "workload.input_len=1000", "workload.output_len=100", "workload.concurrency=64"]
    comm = []
    for sc in (_sc(*base), _sc(*base, ADP)):
        sp = resolve_split(sc).as_column()
        comm.append(forward_comm(sc, sp, strides(sc.parallel.order, sp.degrees), np.array([64.0]), False)[0][0])
    sc = _sc(*base)
    sp = resolve_split(sc).as_column()
    pair = sum(group_collectives(sc.network, op, np.array([64 * 8192 * 2.0]), sp.tp, np.array([1]))[0][0]
               for op in ("all_gather", "reduce_scatter"))
    assert comm[1] == pytest.approx(80 * pair, rel=1e-12)  # 80 layers
    assert comm[0] / 2 <= comm[1] <= comm[0]


def test_a_lone_request_runs_its_prompt_on_one_rank():
    # one request at a time: with attention data-parallel its whole prompt runs on one rank at tp 1, so its
    # time to first token cannot beat plain tp 8, which splits the prompt's heads over the eight
    plain, adp = record(_sc(*DSR1[:-1], "workload.concurrency=1")), record(_sc(*DSR1[:-1], "workload.concurrency=1",
                                                                                 ADP))
    assert adp["ttft_s"] > 1.2 * plain["ttft_s"]
    assert adp["tpot_s"] >= plain["tpot_s"]  # its decode too: one rank's whole attention weights


def test_experts_outside_the_tp_ranks_are_refused():
    from llmsim.engine.errors import DesignError

    with pytest.raises(DesignError, match="ep \\(4\\) must divide tp \\(2\\)"):
        record(_sc(*[x for x in DSR1 if not x.startswith(("parallel.tp", "parallel.ep"))], "parallel.tp=2",
                   "parallel.ep=4", ADP))


def test_one_rank_is_no_change():
    base = ["model=qwen3-30b-a3b", "system.num_devices=8", "parallel.tp=1", "parallel.pp=1", "workload.mode=serving",
            "workload.input_len=1000", "workload.output_len=200", "workload.concurrency=64"]
    a, b = record(_sc(*base)), record(_sc(*base, ADP))
    assert b.pop("attention_dp") is True and a.pop("attention_dp") is False
    assert a.keys() == b.keys()
    assert all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)  # NaN (no speculation) as NaN


def test_attention_dp_serves_deepseek_r1_at_its_published_load():
    # TensorRT-LLM's DeepSeek-R1 guide ran 1,024 requests at once on 8 H200 with attention DP and EP 8 (the
    # 2025-26 record trtllm_dsr1_fp8_h200_tep8_adp_c1024): without attention DP every rank caches every
    # request's latent and llmsim fits 340 of them; with it all 1,024 run
    engine = ["serving.engine=tensorrt-llm", "serving.max_seqs=2048"]
    plain = record(_sc(*DSR1[:-1], *engine))
    adp = record(_sc(*DSR1[:-1], *engine, ADP))
    assert plain["running_requests_per_replica"] < 400
    assert adp["running_requests_per_replica"] == 1024
    assert adp["throughput_tokens_per_s"] > 2 * plain["throughput_tokens_per_s"]
    mi355x = record(_sc(*DSR1[:-1], *engine, "system.accelerator=mi355x", "system.network=mi355x-8", ADP))
    assert mi355x["fits_in_memory"] and mi355x["running_requests_per_replica"] == 1024


@pytest.mark.parametrize("extra, says", [
    (["workload.mode=inference", "workload.batch_size=4"], "modelled for workload.mode serving"),
    (["serving.disaggregation={prefill: {tp: 8}, decode: {tp: 8}}", "serving.disaggregation.prefill_devices=8"],
     "disaggregated pools take their own"),
    (["serving.speculative={acceptance_rate: 0.7}"], "without speculative decoding"),
])
def test_attention_dp_outside_co_located_serving_is_refused(extra, says):
    with pytest.raises(SpecError, match=says):
        _sc(*DSR1, *extra, ADP)


def test_sglang_splits_its_prompt_budget_among_the_attention_ranks():
    # SGLang under --enable-dp-attention divides chunked_prefill_size by the attention ranks (server_args.py,
    # _handle_data_parallelism): on an H200 its 8,192 tokens are 1,024 a rank, so a lone 8,192-token prompt
    # runs in 8 chunks on its rank; a budget of 65,536 gives the rank 8,192, the prompt in one step
    base = [*DSR1[:-1], "workload.input_len=8192", "workload.output_len=256", "workload.concurrency=1",
            "serving.engine=sglang", ADP]
    small, large = record(_sc(*base)), record(_sc(*base, "serving.max_batch_tokens=65536"))
    assert small["ttft_s"] > 1.3 * large["ttft_s"]


def test_search_tries_attention_dp_only_where_it_changes_something(tmp_path):
    import json

    from typer.testing import CliRunner

    from llmsim.cli import app

    args = ["search", "--model", "qwen3-30b-a3b", "--devices", "8", "--set", "workload.mode=serving", "--set",
            "workload.input_len=1000", "--set", "workload.output_len=200", "--set", "workload.concurrency=256",
            "--top", "400", "--format", "json", "--jobs", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout[result.stdout.index("["):])
    assert any(r["attention_dp"] for r in rows) and any(not r["attention_dp"] for r in rows)
    assert not any(r["attention_dp"] and r["tp"] == 1 for r in rows)  # the same as without on one rank
    fixed = CliRunner().invoke(app, [*args, "--set", "parallel.attention_dp=false"])
    assert not any(r["attention_dp"] for r in json.loads(fixed.stdout[fixed.stdout.index("["):]))


POOLS = [*DSR1[:-1], "system.num_devices=16", "serving.engine=tensorrt-llm", "serving.max_seqs=100000",
         "serving.disaggregation.prefill_devices=8"]


def test_a_decode_pool_with_attention_dp_runs_its_requests_per_rank():
    # the decode pool (8 H200, tp 8, ep 8) caches each request's latent on one rank with attention DP: as
    # co-located (test above), more than six times the requests (less the replicated attention weights)
    plain = record(_sc(*POOLS, "serving.disaggregation={prefill: {tp: 8, ep: 8}, decode: {tp: 8, ep: 8}}"))
    adp = record(_sc(*POOLS, "serving.disaggregation={prefill: {tp: 8, ep: 8}, "
                             "decode: {tp: 8, ep: 8, attention_dp: true}}"))
    assert adp["decode_attention_dp"] is True and adp["decode_ep"] == 8 and plain["decode_attention_dp"] is False
    assert adp["max_running_requests_per_replica"] > 6 * plain["max_running_requests_per_replica"]
    assert adp["throughput_tokens_per_s"] > 2 * plain["throughput_tokens_per_s"]


def test_a_pool_with_experts_outside_its_tp_ranks_is_refused():
    from llmsim.engine.errors import DesignError

    with pytest.raises(DesignError, match="decode pool: .*ep \\(4\\) must divide tp \\(2\\)"):
        record(_sc(*POOLS, "serving.disaggregation={prefill: {tp: 8}, decode: {tp: 2, ep: 4, attention_dp: true}}"))


SGLANG_ADP = [*DSR1[:-1], "workload.input_len=3200", "workload.output_len=800", "serving.engine=sglang", ADP]


def test_without_chunked_prefill_a_prompt_runs_whole_on_its_rank():
    # no chunks: the budget cannot cut a prompt, so a lone request's TTFT does not depend on it
    ttft = [record(_sc(*SGLANG_ADP, "workload.concurrency=1", "serving.chunked_prefill=false",
                       f"serving.max_batch_tokens={b}"))["ttft_s"] for b in (4096, 65536)]
    assert ttft[0] == pytest.approx(ttft[1], rel=1e-12)


def test_a_wave_under_attention_dp_runs_rank_by_rank():
    # SGLang waves (prefill first): up to tp requests each sit on a rank of their own and their prompts end
    # at the same step, so two requests are not served faster than one; a budget below tp still runs
    one, two = (record(_sc(*SGLANG_ADP, f"workload.concurrency={c}")) for c in (1, 2))
    assert two["ttft_s"] >= one["ttft_s"] * (1 - 1e-9)
    tiny = record(_sc(*SGLANG_ADP, "workload.concurrency=4", "serving.max_batch_tokens=4"))
    assert np.isfinite(tiny["ttft_s"]) and tiny["throughput_tokens_per_s"] > 0


def test_auto_pool_sizes_skip_those_the_split_cannot_form():
    # 40 devices, decode replicas of tp 4 with ep 8 over them: a decode pool of 24 devices (6 replicas)
    # cannot carry ep 8, 32 can; auto picks among the sizes that form (it stopped at the first before)
    row = record(_sc("model=qwen3-30b-a3b", "system.num_devices=40", "workload.mode=serving", "workload.input_len=1000",
                     "workload.output_len=200", "workload.concurrency=64",
                     "serving.disaggregation={prefill: {tp: 4}, decode: {tp: 4, ep: 8}}"))
    assert row["decode_devices"] % 32 == 0 and row["decode_ep"] == 8
