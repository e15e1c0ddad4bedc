"""A model from a Hugging Face ``config.json`` the user supplies (no network access): the fields of the
transformers configuration classes of each family, mapped onto llmsim's model keys.

Families (``architectures[0]``): Llama 2/3/3.1 (LlamaForCausalLM), Llama 4 (Llama4ForConditionalGeneration,
Llama4ForCausalLM: interleaved MoE layers, a shared expert, chunked attention on the RoPE layers),
Mistral/Mixtral, Qwen2.5, Qwen3, Qwen3-MoE, DeepSeek-V2/V3/R1 and Kimi K2 (MLA, dense-first layers,
shared experts; the multi-token-prediction module is reported, not modelled), gpt-oss (alternating
sliding-window layers; the per-head attention sinks, 64 parameters a layer, are left out), Gemma 2/3
(sliding-window layers). A field the family needs and the file lacks, or an unknown architecture, is a
one-line error naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmsim.spec.errors import SpecError
from llmsim.spec.model import ModelSpec

# architectures[0] -> family; a family names how its fields map (below)
ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek",
    "DeepseekV3ForCausalLM": "deepseek",  # DeepSeek-V3, R1 and Kimi K2
    "GptOssForCausalLM": "gpt_oss",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3",
    "Gemma3ForConditionalGeneration": "gemma3",  # text model under text_config; vision tower not counted
    "Llama4ForCausalLM": "llama4",
    "Llama4ForConditionalGeneration": "llama4",  # text model under text_config; vision tower not counted
}
# transformers' default tie_word_embeddings per family (LlamaConfig False, GemmaConfig True, ...)
TIED_DEFAULT = {"gemma2": True, "gemma3": True}
# hidden_act -> llmsim activation; every family above has a gated MLP
ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu",
               "gelu_new": "geglu"}


class _Fields:
    """The config's fields (``text_config``'s for multimodal families), each read with the file and
    the key it came from for the error message."""

    def __init__(self, data: dict, source: str, prefix: str = "") -> None:
        self.data, self.source, self.prefix = data, source, prefix

    def _fail(self, key: str, message: str) -> SpecError:
        return SpecError(message, file=self.source, path=self.prefix + key)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int(self, key: str, default: Any = ..., minimum: int = 1) -> int:
        value = self.data.get(key)
        if value is None:
            if default is ...:
                raise self._fail(key, "missing field, required for this architecture")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._fail(key, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, f"expected true or false, got {value!r}")
        return value

    def str(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise self._fail(key, "missing field, required for this architecture" if value is None
                             else f"expected a string, got {value!r}")
        return value

    def list(self, key: str) -> list | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, list):
            raise self._fail(key, f"expected a list, got {value!r}")
        return value


def read_config(path: str | Path) -> dict:
    """The JSON object of ``path``, or a one-line SpecError (missing file, not JSON, not an object)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read the Hugging Face config: {type(err).__name__}", file=str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}",
                        file=str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("a Hugging Face config.json must be a JSON object", file=str(path))
    return data


def model_from_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """The validated model of a local Hugging Face ``config.json``."""
    data = read_config(path)
    source = str(path)
    archs = data.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise SpecError("missing field (a list naming the model class, e.g. [\"LlamaForCausalLM\"])",
                        file=source, path="architectures")
    family = ARCHITECTURES.get(archs[0])
    if family is None:
        raise SpecError(f"unknown architecture {archs[0]!r}; known: {', '.join(ARCHITECTURES)}",
                        file=source, path="architectures")
    f = _Fields(data, source)
    if "ForConditionalGeneration" in archs[0] or (family in ("llama4", "gemma3") and f.has("text_config")):
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise SpecError("missing field (the language model's configuration)", file=source, path="text_config")
        f = _Fields(text, source, "text_config.")
    fields, notes = _map(family, f)
    label = name or Path(path).resolve().parent.name
    fields.update(name=label, description=f"{archs[0]} from {source}" + "".join(f"; {n}" for n in notes),
                  sources={"shape": f"Hugging Face config {source} (architectures {archs[0]})"})
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        key = ".".join(str(x) for x in first["loc"])
        raise SpecError(f"{first['msg']} (llmsim model key {key} derived from this config)", file=source) from None


def _map(family: str, f: _Fields) -> tuple[dict, list[str]]:
    layers, heads = f.int("num_hidden_layers"), f.int("num_attention_heads")
    act_key = "hidden_activation" if family in ("gemma2", "gemma3") and f.has("hidden_activation") else "hidden_act"
    act = f.str(act_key, "silu")
    if act not in ACTIVATIONS:
        raise f._fail(act_key, f"unknown activation {act!r}; known: {', '.join(ACTIVATIONS)}")
    out: dict[str, Any] = {
        "layers": layers, "hidden": f.int("hidden_size"), "heads": heads,
        "kv_heads": f.int("num_key_value_heads", heads), "vocab": f.int("vocab_size"),
        "activation": ACTIVATIONS[act], "tied_embeddings": f.bool("tie_word_embeddings", TIED_DEFAULT.get(family, False)),
        # biases: gpt-oss's attention and experts carry them; Qwen2's q/k/v-only biases (under 1e-4 of the
        # parameters) are left out, since llmsim's bias key adds them to every linear layer and norm
        "bias": family == "gpt_oss" and f.bool("attention_bias", True),
    }
    if f.has("max_position_embeddings"):
        out["max_seq_len"] = f.int("max_position_embeddings")
    if f.has("head_dim") and family != "deepseek":
        out["head_dim"] = f.int("head_dim")
    notes: list[str] = []
    if family == "llama4":
        out["ffn_hidden"] = f.int("intermediate_size_mlp")  # the dense layers' MLP
        out["moe"] = {"experts": f.int("num_local_experts"), "top_k": f.int("num_experts_per_tok"),
                      "shared_experts": 1, "expert_ffn_hidden": f.int("intermediate_size"),
                      "layer_frequency": f.int("interleave_moe_layer_step", 1)}
    elif family == "deepseek":
        out["ffn_hidden"] = f.int("intermediate_size")  # the first_k_dense_replace dense layers
        out["head_dim"] = f.int("qk_nope_head_dim")
        out["moe"] = {"experts": f.int("n_routed_experts"), "top_k": f.int("num_experts_per_tok"),
                      "shared_experts": f.int("n_shared_experts", 0, minimum=0),
                      "expert_ffn_hidden": f.int("moe_intermediate_size"),
                      "first_dense_layers": f.int("first_k_dense_replace", 0, minimum=0),
                      "layer_frequency": f.int("moe_layer_freq", 1)}
        out["mla"] = {"q_lora_rank": f.int("q_lora_rank", 0, minimum=0), "kv_lora_rank": f.int("kv_lora_rank"),
                      "qk_rope_head_dim": f.int("qk_rope_head_dim"), "v_head_dim": f.int("v_head_dim")}
        mtp = f.int("num_nextn_predict_layers", 0, minimum=0)
        if mtp:
            notes.append(f"multi-token prediction module ({mtp} layer) not counted or modelled")
    elif family in ("mixtral", "gpt_oss"):
        out["ffn_hidden"] = f.int("intermediate_size")
        out["moe"] = {"experts": f.int("num_local_experts"),
                      "top_k": f.int("num_experts_per_tok" if f.has("num_experts_per_tok") or family == "mixtral"
                                     else "experts_per_token"),
                      "expert_ffn_hidden": out["ffn_hidden"]}
    elif family == "qwen3_moe":
        if f.list("mlp_only_layers"):
            raise f._fail("mlp_only_layers", "dense layers at chosen positions are not modelled; allowed: []")
        out["ffn_hidden"] = f.int("moe_intermediate_size")  # no dense layers: intermediate_size is unused
        out["moe"] = {"experts": f.int("num_experts"), "top_k": f.int("num_experts_per_tok"),
                      "expert_ffn_hidden": out["ffn_hidden"],
                      "layer_frequency": f.int("decoder_sparse_step", 1)}
    else:
        out["ffn_hidden"] = f.int("intermediate_size")
    window = _window(family, f, layers)
    if window:
        out["attention_window"] = window
    return out, notes


def _window(family: str, f: _Fields, layers: int) -> dict | None:
    """Sliding-window or chunked attention, and how many layers have it."""
    if family == "llama4":
        if not f.has("attention_chunk_size"):
            return None
        rope = f.list("no_rope_layers")  # 1: RoPE layer with chunked attention, 0: NoPE layer, global
        local = (sum(1 for x in rope[:layers] if x) if rope
                 else layers - layers // f.int("no_rope_layer_interval", 4))
        return {"kind": "chunked", "tokens": f.int("attention_chunk_size"), "layers": local} if local else None
    key = "sliding_window_size" if family == "gemma2" and not f.has("sliding_window") else "sliding_window"
    if not f.has(key) or (family in ("qwen2", "qwen3", "qwen3_moe") and not f.bool("use_sliding_window", False)):
        return None
    tokens = f.int(key)
    types = f.list("layer_types")
    if types is not None:
        if len(types) != layers:
            raise f._fail("layer_types", f"has {len(types)} entries for {layers} layers")
        local = sum(1 for t in types if t in ("sliding_attention", "chunked_attention"))
    elif family == "gemma2" or family == "gpt_oss":
        local = (layers + 1) // 2  # alternating, starting with a sliding layer
    elif family == "gemma3":
        local = layers - layers // f.int("sliding_window_pattern", 6)  # every pattern-th layer global
    elif family in ("qwen2", "qwen3", "qwen3_moe"):
        local = layers - f.int("max_window_layers", layers, minimum=0)  # layers above max_window_layers
    else:  # Mistral: every layer
        local = layers
    return {"kind": "sliding", "tokens": tokens, "layers": local} if local else None
