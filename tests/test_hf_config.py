"""Models from Hugging Face config.json files: one hand-written config per family under tests/data/<family>/
(each names its huggingface.co source in "_source"), parameter counts against the model cards, KV-cache
bytes per token worked by hand, windowed attention, and one-line errors for bad configs."""

import pytest
from conftest import DATA, run_cli

from llmsim.engine.params import param_counts
from llmsim.engine.window import key_span, pair_fraction
from llmsim.spec.convert import model_values
from llmsim.spec.errors import SpecError
from llmsim.spec.hf_config import model_from_hf_config
from llmsim.study import records as est

FAMILIES = ["llama2", "llama3", "llama3_1", "llama4", "mistral", "mixtral", "qwen2_5", "qwen3", "qwen3_moe",
            "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "gemma2", "gemma3"]


def _model(family: str):
    return model_values(model_from_hf_config(DATA / family / "config.json"))


# (family, model card total, card active, tolerance on active). Totals within 1%; an active figure the card
# rounds to two digits is held to that rounding (half a unit of its last digit).
CARDS = [
    ("llama2", 6.74e9, None, None),  # Llama-2-7b-hf model page: 6.74B params (safetensors)
    ("llama3", 8.03e9, None, None),  # Meta-Llama-3-8B model card: 8.03B
    ("llama3_1", 8.03e9, None, None),  # Llama-3.1-8B model card: 8.03B (same shape, RoPE scaling only)
    ("llama4", 400e9, 17e9, 0.03),  # Llama 4 Maverick model card: 400B total, 17B active
    ("mistral", 7.24e9, None, None),  # Mistral-7B-v0.1 model page: 7.24B params
    ("mixtral", 46.7e9, 12.9e9, 0.01),  # Mixtral of experts (arXiv 2401.04088): 46.7B total, 12.9B active
    ("qwen2_5", 7.61e9, None, None),  # Qwen2.5-7B model card: 7.61B (6.53B non-embedding)
    ("qwen3", 8.2e9, None, None),  # Qwen3-8B model card: 8.2B (6.95B non-embedding)
    ("qwen3_moe", 30.5e9, 3.3e9, 0.02),  # Qwen3-30B-A3B model card: 30.5B total, 3.3B activated (3.35B here)
    ("deepseek_v2", 236e9, 21e9, 0.024),  # DeepSeek-V2 (arXiv 2405.04434): 236B total, 21B activated
    ("deepseek_v3", 671e9, 37e9, 0.015),  # DeepSeek-V3/R1 (arXiv 2412.19437): 671B total, 37B activated
    ("gpt_oss", 20.91e9, None, None),  # gpt-oss model card (arXiv 2508.10925) Table 1: 20.91B total
    ("gemma2", 9.24e9, None, None),  # gemma-2-9b model page: 9.24B params
    ("gemma3", 27e9, None, None),  # Gemma 3 27B model card: 27B (text decoder; the 0.4B vision tower not read)
]


@pytest.mark.parametrize("family, total, active, tol", CARDS)
def test_param_counts_match_model_cards(family, total, active, tol):
    counts = param_counts(_model(family))
    assert counts.total == pytest.approx(total, rel=0.01)
    if active:
        assert counts.active == pytest.approx(active, rel=tol)


def test_kimi_k2_params_as_its_config_gives():
    # Kimi K2 tech report (arXiv 2507.20534): "1.04 trillion total parameters", "32 billion activated".
    # The config's shapes add up to 1.026e12 (-1.3%): 60 MoE layers x 384 experts x 3 x 7168 x 2048
    # = 1.0147e12, plus MLA attention 61 x 101.1e6, the dense first layer's MLP 3 x 7168 x 18432, a
    # shared expert per MoE layer and the untied 163840 x 7168 embeddings. Held to 1.5% of the report.
    counts = param_counts(_model("kimi_k2"))
    assert counts.total == pytest.approx(1.04e12, rel=0.015)
    assert counts.active == pytest.approx(32.5e9, rel=0.02)


def test_gpt_oss_active_as_openai_counts_it():
    # OpenAI's 3.61B active (Table 1) leaves the input embedding out: 4.188e9 - 201088 x 2880 = 3.609e9
    m = _model("gpt_oss")
    assert param_counts(m).active - m.vocab * m.hidden == pytest.approx(3.61e9, rel=0.01)


def test_hf_config_equals_the_bundled_preset(registry):
    from dataclasses import replace

    assert _model("llama3") == replace(model_values(registry.get("models", "llama3-8b")), name="llama3")


def _kv_bytes_per_token(family: str, ctx: int) -> float:
    """KV-cache bytes per token of context, summed over layers, bf16, one device (batch 1)."""
    from llmsim.spec.flags import flag_paths

    argv = ["--model", str(DATA / family / "config.json"), "--mode", "inference", "--devices", "1", "--tp", "1",
            "--pp", "1", "--batch-size", "1", "--input-len", str(ctx - 128), "--output-len", "128"]
    flags = dict(zip(argv[0::2], argv[1::2]))
    overrides = [f"{'.'.join(flag_paths()[k.lstrip('-').replace('-', '_')])}={v}" for k, v in flags.items()]
    rec = est.record(est.load(None, _registry(), overrides))
    return rec["kv_cache_gb"] * 1e9 / ctx


def _registry():
    from llmsim.spec.presets import PresetRegistry

    return PresetRegistry()


def test_kv_bytes_gqa_by_hand():
    # Llama 3 8B, GQA: K and V x 8 KV heads x 128 dims x 2 B = 4,096 B per layer; x 32 layers = 131,072 B
    assert _kv_bytes_per_token("llama3", 8192) == pytest.approx(131_072, rel=1e-12)


def test_kv_bytes_mla_by_hand():
    # DeepSeek-V3 MLA caches the 512-d latent and the 64-d RoPE key once per layer (not per head):
    # (512 + 64) x 2 B = 1,152 B per layer; x 61 layers = 70,272 B
    assert _kv_bytes_per_token("deepseek_v3", 8192) == pytest.approx(70_272, rel=1e-12)


def test_kv_bytes_sliding_window_by_hand():
    # gpt-oss-20b: K and V x 8 KV heads x 64 dims x 2 B = 2,048 B per layer per cached token.
    # At 8,192 tokens of context the 12 full layers cache all 8,192 tokens, the 12 sliding layers only
    # their 128-token window: 2,048 x (12 x 8,192 + 12 x 128) = 204,472,320 B per sequence,
    # = 24,960 B per token of context (without the window: 2,048 x 24 = 49,152 B).
    assert _kv_bytes_per_token("gpt_oss", 8192) * 8192 == pytest.approx(204_472_320, rel=1e-12)


def test_windows_read_from_the_configs():
    windows = {f: _model(f).attention_window for f in ("mistral", "gpt_oss", "gemma2", "gemma3", "llama4")}
    assert {f: (w.kind, w.tokens, w.layers) for f, w in windows.items()} == {
        "mistral": ("sliding", 4096, 32),  # every layer
        "gpt_oss": ("sliding", 128, 12),  # layer_types: alternating sliding/full
        "gemma2": ("sliding", 4096, 21),  # alternating, 42 layers
        "gemma3": ("sliding", 1024, 52),  # 5 local : 1 global, 62 layers -> 10 global
        "llama4": ("chunked", 8192, 36),  # RoPE layers chunked, every 4th (NoPE) layer global
    }
    assert _model("llama3").attention_window is None and _model("qwen2_5").attention_window is None


def test_window_pairs_and_spans_by_hand():
    mistral, llama4 = _model("mistral"), _model("llama4")
    # sliding W = 4096 over s = 8192: (2 x 4096 x 8192 - 4096^2) / 8192^2 = 0.75 of the causal pairs
    assert pair_fraction(mistral, 8192) == pytest.approx(0.75)
    assert pair_fraction(mistral, 2048) == 1.0  # shorter than the window: full causal
    # chunked C = 8192 over s = 32768 on 36 of 48 layers: (12 + 36 x 8192/32768) / 48 = 0.4375
    assert pair_fraction(llama4, 32768) == pytest.approx(0.4375)
    # decode: 36 layers read at most 8192 keys, 12 read all 32768: (12 x 32768 + 36 x 8192) / 48 = 14336
    assert key_span(llama4, 32768) == pytest.approx(14336)


def test_window_lowers_attention_flops_not_the_rest():
    # Mistral 7B at 8k: the same model with and without its window: only attention FLOPs change
    from dataclasses import replace

    from llmsim.engine.compute import layer_ops

    m = _model("mistral")
    ops = {o.name: o.flops for o in layer_ops(m, 1, 8192, 1, 1, False, "bf16", False)}
    full = {o.name: o.flops for o in layer_ops(replace(m, attention_window=None), 1, 8192, 1, 1, False, "bf16",
                                                   False)}
    assert ops["attention"] == pytest.approx(0.75 * full["attention"])
    assert {k: v for k, v in ops.items() if k != "attention"} == {k: v for k, v in full.items() if k != "attention"}


@pytest.mark.parametrize("family", FAMILIES)
def test_estimate_runs_for_every_family(family):
    res = run_cli("estimate", "--model", str(DATA / family / "config.json"), "--mode", "inference",
                  "--devices", "4", "--tp", "4", "--pp", "1", "--batch-size", "1", "--input-len", "1024",
                  "--output-len", "64", "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1].startswith(family + ",")


@pytest.mark.parametrize("name, message", [
    ("missing_hidden_size.json", "missing_hidden_size.json: hidden_size: missing field"),
    ("unknown_architecture.json", "architectures: unknown architecture 'FalconForCausalLM'; known: LlamaForCausalLM"),
    ("not_json.json", "not_json.json: not valid JSON: Expecting value at line 1 column 1"),
])
def test_bad_config_is_one_line_exit_2(name, message):
    res = run_cli("estimate", "--model", str(DATA / "bad" / name))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert message in res.stderr


def test_scenario_hf_config_key_and_overrides(tmp_path, registry):
    from llmsim.spec.load import load_scenario

    s = tmp_path / "s.yaml"
    s.write_text(f"model: {{hf_config: {DATA / 'mistral' / 'config.json'}, max_seq_len: 8192}}\n"
                 "system: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}\n"
                 "parallel: {tp: 8, pp: 1}\nworkload: {mode: training, seq_len: 4096, global_batch_size: 8}\n")
    spec = load_scenario(s, registry)
    assert spec.model.attention_window.tokens == 4096 and spec.model.max_seq_len == 8192
    s.write_text(s.read_text().replace(str(DATA / "mistral" / "config.json"), "nowhere.json"))
    with pytest.raises(SpecError, match="model.hf_config: Hugging Face config not found: nowhere.json"):
        load_scenario(s, registry)
