"""Speculative decoding in serving (engine/speculative.py)."""

import numpy as np
import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmsim.engine import speculative
from llmsim.engine.serving import serving_columns
from llmsim.engine.split import resolve_split
from llmsim.study import records as est

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _scenario(registry, conc=1, spec=()):
    return est.load(None, registry, ["model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100",
                                     "system.num_devices=8", "parallel.tp=8", "parallel.pp=1",
                                     "workload.mode=serving", "workload.precision=fp8", "workload.kv_precision=fp8",
                                     "workload.input_len=1024", "workload.output_len=256",
                                     f"workload.concurrency={conc}",
                                     *(f"serving.speculative.{k}={v}" for k, v in spec)])


def _row(sc):
    sp = resolve_split(sc).as_column()
    w = sc.workload
    cols = serving_columns(sc, sp, np.array([w.concurrency]), np.array([w.input_len]), np.array([w.output_len]),
                           np.array([sc.num_devices]))
    return {k: np.asarray(v).ravel()[0] for k, v in cols.items()}


def test_expected_tokens_per_step_by_hand(registry):
    # Leviathan et al. 2023, eq. 1: (1 - a^(k+1)) / (1 - a); k = 3, a = 0.7: (1 - 0.2401) / 0.3 = 2.533
    sc = _scenario(registry, spec=(("acceptance_rate", 0.7), ("draft_tokens", 3)))
    assert speculative.tokens_per_step(sc) == pytest.approx(2.533, abs=1e-9)
    assert speculative.queries(sc) == 4
    # k = 1, a = 0.5: one token always, the draft's kept half the time: 1.5
    sc1 = _scenario(registry, spec=(("acceptance_rate", 0.5), ("draft_tokens", 1)))
    assert speculative.tokens_per_step(sc1) == pytest.approx(1.5)
    assert speculative.tokens_per_step(_scenario(registry)) == 1.0


def test_batch_one_verification_costs_about_a_decode_step(registry):
    # at one request the 70B decode step is bound by reading the weights (70e9 fp8 bytes / 8 GPUs), so
    # verifying 4 positions costs about what decoding 1 does; the draft head adds k x (1 of 80 layers + the
    # output layer), so TPOT x E lies between the plain step and 1.5x it
    plain = _row(_scenario(registry))["tpot_s"]
    spec = _row(_scenario(registry, spec=(("acceptance_rate", 0.7),)))
    assert spec["tokens_per_decode_step"] == pytest.approx(2.533, rel=1e-3)
    step = spec["tpot_s"] * spec["tokens_per_decode_step"]
    assert plain < step < 1.5 * plain
    assert spec["tpot_s"] < plain / 1.6  # a 2.5-token step costing < 1.5 steps: > 1.6x faster


def test_drafts_that_are_never_kept_only_cost(registry):
    plain = _row(_scenario(registry))
    spec = _row(_scenario(registry, spec=(("acceptance_rate", 0.01),)))
    assert spec["tpot_s"] > plain["tpot_s"]
    assert spec["throughput_tokens_per_s_per_device"] < plain["throughput_tokens_per_s_per_device"]


def test_long_drafts_stop_paying_when_the_step_is_compute_bound(registry):
    # at 128 requests the verification of k + 1 positions per request is no longer free: 8 drafted tokens
    # (E = 3.2 at a = 0.7) serve less than 2 (E = 2.19)
    def tput(k):
        return _row(_scenario(registry, conc=128, spec=(("acceptance_rate", 0.7), ("draft_tokens", k))))[
            "throughput_tokens_per_s_per_device"]
    assert tput(8) < tput(2)


@SETTINGS
@given(a=st.floats(0.05, 0.9), b=st.floats(0.05, 0.9), conc=st.sampled_from([1, 8, 64]))
def test_a_higher_acceptance_rate_never_slows_decoding(registry, a, b, conc):
    lo, hi = sorted((a, b))
    slow = _row(_scenario(registry, conc=conc, spec=(("acceptance_rate", lo),)))
    fast = _row(_scenario(registry, conc=conc, spec=(("acceptance_rate", hi),)))
    assert fast["tpot_s"] <= slow["tpot_s"] * (1 + 1e-9)


def test_speculative_outside_co_located_serving_is_refused():
    r = run_cli("estimate", "--set", "serving.speculative.acceptance_rate=0.7")  # the default: training
    assert r.returncode == 2 and "serving.speculative is modelled for workload.mode serving" in r.stderr
    assert "Traceback" not in r.stderr


def test_the_bundled_study_shows_where_speculation_pays(tmp_path):
    # README's row for sweeps/serving-speculative.yaml: big gains at few requests, small ones or losses
    # once the step is compute-bound
    from pathlib import Path

    import pandas as pd

    spec = Path(__file__).resolve().parents[1] / "sweeps" / "serving-speculative.yaml"
    csv = tmp_path / "s.csv"
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1", "-o", str(csv))
    assert r.returncode == 0, r.stderr
    d = pd.read_csv(csv).set_index(["concurrency", "speculative_draft_tokens"])
    assert len(d) == 25
    tput = d["throughput_tokens_per_s_per_device"]
    assert d.loc[(1, 4), "tpot_s"] < d.loc[(1, 0), "tpot_s"] / 2.5
    assert tput[(64, 4)] > 1.3 * tput[(64, 0)]
    assert tput[(256, 8)] < tput[(256, 0)] < tput[(256, 1)]


def test_a_step_cannot_keep_tokens_past_the_end_of_the_output(registry):
    # two output tokens: one from the prefill, one decode step; 8 drafted tokens at a = 0.9 would keep
    # E = 6.1 on average, but the request ends after 1: the decode costs a whole (verify + draft) step
    def row(spec):
        sc = est.load(None, registry, ["model=llama3-70b", "system.accelerator=h100-sxm", "system.network=dgx-h100",
                                       "system.num_devices=8", "parallel.tp=8", "parallel.pp=1",
                                       "workload.mode=serving", "workload.precision=fp8", "workload.input_len=1024",
                                       "workload.output_len=2", "workload.concurrency=1", *spec])
        return _row(sc)
    plain = row([])
    spec = row(["serving.speculative.acceptance_rate=0.9", "serving.speculative.draft_tokens=8"])
    assert spec["tokens_per_decode_step"] == 1.0
    assert spec["tpot_s"] > plain["tpot_s"]


def test_more_than_sixteen_drafted_tokens_are_refused_in_one_line():
    r = run_cli("estimate", "--mode", "serving", "--concurrency", "1", "--input-len", "512", "--output-len", "64",
                "--set", "serving.speculative.acceptance_rate=0.5", "--set", "serving.speculative.draft_tokens=40")
    assert r.returncode == 2 and "serving.speculative.draft_tokens" in r.stderr and "16" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_draft_model_adds_its_weights_and_its_kv_cache_by_hand(registry):
    # Llama 3.2 1B (presets/models/llama3.2-1b.yaml) drafting for Llama 3 70B on tp 8, in FP8 (draft_precision;
    # its default is its checkpoint's bf16), FP8 weights and KV:
    # weights 128,256 x 2,048 (tied embedding) + 16 x (2 x 2,048^2 + 2 x 2,048 x 512 + 3 x 2,048 x 8,192
    # + 2 x 2,048 norms) = 1,235,812,352 parameters (the final norm's 2,048 are left out of the weights, as
    # for every model), 1 byte each over 8 ranks = 154,476,544 bytes;
    # KV per token: 16 layers x (8 kv heads / 8 ranks) x 64 x 2 (K and V) x 1 byte = 2,048 bytes
    from llmsim.engine.kv_capacity import running_limit

    def lim(spec):
        sc = _scenario(registry, spec=spec)
        w = sc.workload
        return running_limit(sc, resolve_split(sc).as_column(), np.array([w.input_len]), np.array([w.output_len]))

    plain = lim(())
    draft = lim((("acceptance_rate", 0.7), ("draft_model", "llama3.2-1b"), ("draft_precision", "fp8")))
    assert plain["kv_free_bytes"][0] - draft["kv_free_bytes"][0] == pytest.approx(154_476_544, rel=1e-12)
    # the mean context of a running request, 1,024 + 256 / 2 = 1,152 tokens, is 72 whole blocks of 16
    assert draft["kv_per_seq_bytes"][0] - plain["kv_per_seq_bytes"][0] == pytest.approx(1152 * 2048, rel=1e-9)


def test_a_draft_model_runs_all_its_layers_per_drafted_token(registry):
    # the draft model's part of a step is k x (16 layers + its output layer): one more drafted token adds
    # one such pass; a head of one 70B-shaped layer costs less than sixteen 1B layers' kernels at batch 1
    def step(spec):
        sc = _scenario(registry, spec=(("acceptance_rate", 0.7), *spec))
        r = _row(sc)
        return r["tpot_s"] * r["tokens_per_decode_step"], speculative.draft_layers(sc)
    s3, layers = step((("draft_tokens", 3), ("draft_model", "llama3.2-1b")))
    s4, _ = step((("draft_tokens", 4), ("draft_model", "llama3.2-1b")))
    head, one = step((("draft_tokens", 3),))
    assert (layers, one) == (16, 1)
    assert s4 > s3 > head


@SETTINGS
@given(a=st.floats(0.05, 0.9), conc=st.sampled_from([1, 8, 64]), k=st.integers(1, 6))
def test_a_larger_draft_model_never_decodes_faster(registry, a, conc, k):
    def tpot(draft):
        return _row(_scenario(registry, conc=conc, spec=(("acceptance_rate", a), ("draft_tokens", k),
                                                         ("draft_model", draft))))["tpot_s"]
    assert tpot("llama3.2-3b") >= tpot("llama3.2-1b")


@pytest.mark.parametrize(("flags", "message"), [
    (["serving.speculative.draft_model=gemma2-9b"], "needs the target's tokenizer"),
    (["serving.speculative.draft_model=llama3.2-1b", "serving.speculative.draft_layers=2"],
     "draft_layers is for a draft head"),
])
def test_a_draft_model_that_cannot_draft_is_refused_in_one_line(flags, message):
    args = ["estimate", "--mode", "serving", "--model", "llama3-70b", "--tp", "8", "--pp", "1", "--devices", "8",
            "--concurrency", "1", "--input-len", "512", "--output-len", "64",
            "--set", "serving.speculative.acceptance_rate=0.7"]
    for f in flags:
        args += ["--set", f]
    r = run_cli(*args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_sweep_names_the_draft_model(tmp_path):
    import pandas as pd

    spec = tmp_path / "s.yaml"
    spec.write_text("""\
base:
  model: llama3-70b
  system: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}
  parallel: {tp: 8, pp: 1}
  workload: {mode: serving, precision: fp8, input_len: 1024, output_len: 256, concurrency: 4}
grid:
  serving.speculative:
    - null
    - {acceptance_rate: 0.7, draft_tokens: 4, draft_model: llama3.2-1b}
""")
    csv = tmp_path / "s.csv"
    r = run_cli("sweep", str(spec), "--quiet", "--jobs", "1", "-o", str(csv))
    assert r.returncode == 0, r.stderr
    d = pd.read_csv(csv)
    assert d["speculative_draft_model"].isna().tolist() == [True, False]
    assert d["speculative_draft_model"].iloc[1] == "llama3.2-1b" and d["speculative_draft_layers"].tolist() == [0, 16]


def test_a_draft_model_whose_heads_do_not_split_over_tp_is_refused(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("""\
model: llama3-70b
system: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}
parallel: {tp: 8, pp: 1}
workload: {mode: serving, precision: fp8, input_len: 512, output_len: 64, concurrency: 1}
serving:
  speculative:
    acceptance_rate: 0.7
    draft_model: {name: odd-draft, layers: 4, hidden: 1792, ffn_hidden: 4096, heads: 14, kv_heads: 7,
                  head_dim: 128, vocab: 128256, activation: swiglu}
""")
    r = run_cli("estimate", str(scenario))
    assert r.returncode == 2 and "draft model's heads (14) are not divisible by tp (8)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_moe_draft_keeps_its_experts_on_the_tp_ranks(registry, monkeypatch):
    # Qwen3-30B-A3B drafting for Qwen3-235B-A22B on 16 H100 (tp 8, dp 2): the draft's experts sit on the
    # tp ranks (its compute takes ep 1), so its per-layer communication is the tp all-reduce alone whether
    # the target spreads its experts over ep 2 or not (no expert all-to-all across the ep group)
    seen = []
    draft_time = speculative.draft_time
    monkeypatch.setattr(speculative, "draft_time",
                        lambda sc, layer, head, comm: seen.append(float(np.ravel(comm)[0])) or draft_time(
                            sc, layer, head, comm))

    def layer_comm(ep):
        seen.clear()
        sc = est.load(None, registry, ["model=qwen3-235b-a22b", "system.accelerator=h100-sxm",
                                       "system.network=dgx-h100", "system.num_devices=16", "parallel.tp=8",
                                       "parallel.pp=1", f"parallel.ep={ep}", "workload.mode=serving",
                                       "workload.precision=fp8", "workload.input_len=512", "workload.output_len=64",
                                       "workload.concurrency=1", "serving.speculative.acceptance_rate=0.7",
                                       "serving.speculative.draft_model=qwen3-30b-a3b"])
        _row(sc)
        return seen[0]
    assert layer_comm(2) == pytest.approx(layer_comm(1), rel=1e-12) and layer_comm(1) > 0


def test_a_draft_model_runs_at_its_own_precision_by_hand(registry):
    # Llama 3.2 1B: embedding 128,256 x 2,048 = 262,668,288 (tied); a layer's attention 2 x 2,048^2 + 2 x
    # 2,048 x 512 = 10,485,760, MLP 3 x 2,048 x 8,192 = 50,331,648, norms 4,096: 60,821,504 x 16 layers:
    # 1,235,812,352 parameters (the final norm left out, as in the test above), split over the target's 8 tp
    # ranks. Drafting at bf16 (its checkpoint, the default) instead of FP8 holds 1,235,812,352 x (2 - 1) / 8 =
    # 154,476,544 bytes more a device
    from llmsim.study.records import load, record

    base = ["model=llama3-70b", "system.num_devices=8", "parallel.tp=8", "parallel.pp=1", "workload.mode=serving",
            "workload.precision=fp8", "workload.input_len=1000", "workload.output_len=200", "workload.concurrency=16"]
    spec = "serving.speculative={acceptance_rate: 0.7, draft_model: llama3.2-1b"
    own, fp8 = (record(load(None, registry, [*base, spec + extra + "}"])) for extra in ("", ", draft_precision: fp8"))
    assert (own["memory_per_device_gb"] - fp8["memory_per_device_gb"]) * 1e9 == pytest.approx(154_476_544, rel=1e-9)


@pytest.mark.parametrize("speculative, says", [
    ("{acceptance_rate: 0.7, draft_precision: fp8}", "draft_precision is for a draft_model"),
    ("{acceptance_rate: 0.7, draft_model: llama3.2-1b, draft_precision: fp4}", "not supported by accelerator"),
])
def test_draft_precision_is_checked(registry, speculative, says):
    from llmsim.spec.errors import SpecError
    from llmsim.study.records import load

    with pytest.raises(SpecError, match=says):
        load(None, registry, ["model=llama3-70b", "workload.mode=serving", "workload.input_len=1000",
                              "workload.output_len=200", "workload.concurrency=16", f"serving.speculative={speculative}"])


def test_a_quantised_draft_keeps_its_published_precision(registry):
    # gpt-oss-20b is published with MXFP4 experts (its preset's precision): unset, the draft keeps them, as the
    # engines load its checkpoint; drafting it at bf16 holds its experts at 2 bytes instead of 0.53125
    from llmsim.study.records import load, record

    base = ["model=gpt-oss-120b", "system.accelerator=h100-sxm", "system.num_devices=4", "parallel.tp=4",
            "parallel.pp=1", "workload.mode=serving", "workload.precision=native", "workload.input_len=1000",
            "workload.output_len=200", "workload.concurrency=16"]
    spec = "serving.speculative={acceptance_rate: 0.7, draft_model: gpt-oss-20b"
    published, mapping, bf16 = (record(load(None, registry, [*base, spec + extra + "}"])) for extra in (
        "", ", draft_precision: {activations: bf16, experts: mxfp4}", ", draft_precision: bf16"))
    assert published["memory_per_device_gb"] == mapping["memory_per_device_gb"]
    assert published["tpot_s"] == mapping["tpot_s"]
    assert bf16["memory_per_device_gb"] > published["memory_per_device_gb"] + 5  # ~19 B expert params / 4 ranks
