"""Every bundled preset loads, carries sources, and has sane derived values."""

import pytest

from llmsim.engine.params import param_counts
from llmsim.spec.convert import accelerator_values, model_values, network_values
from llmsim.spec.presets import KINDS, PresetRegistry

CONTRACT = {
    "accelerators": "a100-sxm-40gb a100-sxm-80gb h100-sxm h800-sxm h200-sxm b200 gb200 gb300 mi300x mi325x "
                    "tpu-v4 tpu-v5e tpu-v5p gaudi3",
    "networks": "dgx-a100 dgx-h100 hgx-h800 dgx-h200 dgx-b200 gb200-nvl72 gb300-nvl72 mi300x-8 tpu-v4-pod "
                "tpu-v5p-pod",
    "models": "gpt3-175b mt-nlg-530b llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b llama3-405b "
              "mixtral-8x7b mixtral-8x22b qwen3-235b-a22b gpt-oss-120b deepseek-v3 nemotron4-15b "
              "nemotron4-340b gpt-moe-1.8t",
}


@pytest.mark.parametrize("kind", list(CONTRACT))
def test_contract_names_present(registry, kind):
    assert set(CONTRACT[kind].split()) <= set(registry.names(kind))


def _all(registry):
    return [(k, n) for k in KINDS for n in registry.names(k)]


def _numeric_fields(data: dict, prefix: str = ""):
    for key, value in data.items():
        if key in ("sources", "name", "description"):
            continue
        path = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            yield path
        elif isinstance(value, dict):
            yield from _numeric_fields(value, path + ".")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    yield from _numeric_fields(item, f"{path}.{i}.")
                elif isinstance(item, (int, float)):
                    yield path


def test_every_numeric_field_has_a_source(registry):
    missing = []
    for kind, name in _all(registry):
        spec = registry.get(kind, name)
        data = spec.model_dump(exclude_none=True, exclude_defaults=True)
        sources = spec.sources
        for path in _numeric_fields(data):
            parts = path.split(".")
            # a source may cover the field, a parent group ("peak_tflops", "moe", "tiers.0") or "shape"
            keys = {".".join(parts[:i]) for i in range(1, len(parts) + 1)} | {"shape"}
            if not keys & set(sources):
                missing.append(f"{kind}/{name}: {path}")
    assert not missing, missing


def test_presets_convert_to_values(registry):
    for name in registry.names("accelerators"):
        acc = accelerator_values(registry.get("accelerators", name))
        assert acc.hbm_bytes > 1e9 and acc.hbm_bw_bytes_per_s > 1e11
        assert acc.peak("bf16") > 1e14  # every bundled device has a 16-bit matrix unit
    for name in registry.names("networks"):
        net = network_values(registry.get("networks", name))
        assert all(t.bw_bytes_per_s >= 1e9 for t in net.tiers)


@pytest.mark.parametrize("name", CONTRACT["models"].split())
def test_head_dim_times_heads(registry, name):
    m = model_values(registry.get("models", name))
    if m.head_dim * m.heads != m.hidden:  # allowed only when head_dim is explicit (Qwen3, gpt-oss, MLA)
        assert registry.get("models", name).head_dim is not None


@pytest.mark.parametrize("name, published, active", [
    ("llama3-8b", 8.03e9, None),  # Llama 3 model card: 8.03B
    ("gpt3-175b", 1.75e11, None),  # Brown et al. 2020 Table 2.1
    ("llama2-70b", 6.9e10, None),  # Touvron et al. 2023: 70B (68.98B in config)
    ("mixtral-8x7b", 46.7e9, 12.9e9),  # Mistral AI: 46.7B total, 12.9B active
    ("deepseek-v3", 671e9, 37e9),  # DeepSeek-V3 report: 671B total, 37B active
    ("qwen3-235b-a22b", 235e9, 22e9),  # Qwen3 report: 235B total, 22B active
])
def test_param_counts_match_published(registry, name, published, active):
    counts = param_counts(model_values(registry.get("models", name)))
    assert counts.total == pytest.approx(published, rel=0.02)
    if active:
        assert counts.active == pytest.approx(active, rel=0.03)


def test_llama3_8b_params_by_hand(registry):
    # embeddings 2*128256*4096 = 1,050,673,152; per layer: attention 4096*4096*2 + 4096*1024*2
    # = 41,943,040, MLP 3*4096*14336 = 176,160,768, norms 2*4096 -> 218,112,000 * 32 = 6,979,584,000;
    # final norm 4096 -> 8,030,261,248 (config.json: 8,030,261,248).
    counts = param_counts(model_values(registry.get("models", "llama3-8b")))
    assert counts.total == 8_030_261_248


def test_user_preset_wins_and_env_var(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "llama3-8b.yaml").write_text(
        "name: llama3-8b\nlayers: 2\nhidden: 64\nffn_hidden: 128\nheads: 4\nvocab: 10\n")
    (tmp_path / "models" / "tiny.yaml").write_text("layers: 1\nhidden: 8\nffn_hidden: 8\nheads: 1\nvocab: 5\n")
    reg = PresetRegistry([str(tmp_path)])
    assert reg.get("models", "llama3-8b").layers == 2 and reg.get("models", "tiny").name == "tiny"
    monkeypatch.setenv("LLMSIM_PRESETS", str(tmp_path))
    assert PresetRegistry().get("models", "llama3-8b").layers == 2
