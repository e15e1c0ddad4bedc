"""Schema of a scenario: one design point (model, system, parallel split, workload)."""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from llmsim.engine.network.capacity import too_many_devices
from llmsim.engine.settings import (
    DEFAULT_ORDER,
    CostRates,
    Degree,
    Parallel,
    Reliability,
    ServingSettings,
    WorkloadSettings,
)
from llmsim.spec.base import PosFloat, PosInt, Strict
from llmsim.spec.declared import declared_model
from llmsim.spec.hardware import AcceleratorSpec, NetworkSpec
from llmsim.spec.model import ModelSpec, PrecisionName, PrecisionSpec

BF16_PARAM_PRECISIONS = ("bf16", "fp8", "fp4")  # FP8/FP4 recipes keep bf16 parameters (Transformer Engine)


class ParallelSpec(declared_model(Parallel, "ParallelSettings")):
    """The ``parallel`` section: its settings are declared in engine/settings.py (``Parallel``)."""

    @model_validator(mode="after")
    def _check(self) -> ParallelSpec:
        if sorted(self.order) != sorted(DEFAULT_ORDER):
            raise ValueError(f"order must list each of {', '.join(DEFAULT_ORDER)} exactly once")
        return self

    @field_validator("recompute", mode="before")
    @classmethod
    def _recompute(cls, v) -> str:
        if not isinstance(v, str):  # e.g. an unquoted `selective:` that YAML read as a mapping
            # pydantic turns a ValueError (not a TypeError) into the one-line validation error
            raise ValueError(f"{v!r} is not text: {ALLOWED_RECOMPUTE} (quote a value ending in ':')")  # noqa: TRY004
        return canonical_recompute(v)


RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp")
ALLOWED_RECOMPUTE = (f"expected 'none', 'selective' or 'full', or 'selective:' and modules joined by '+' from "
                     f"{', '.join(RECOMPUTE_MODULES)} (e.g. selective:moe_act+layernorm)")


def canonical_recompute(text: str) -> str:
    """``recompute`` checked and written one way (modules in ``RECOMPUTE_MODULES`` order, no repeats)."""
    if text in ("none", "selective", "full"):
        return text
    head, _, tail = str(text).partition(":")
    names = tail.split("+") if tail else []
    unknown = [x for x in names if x not in RECOMPUTE_MODULES]
    if head != "selective" or not names or unknown:
        raise ValueError(f"{text!r}: {ALLOWED_RECOMPUTE}")
    if set(names) == {"core_attn"}:
        return "selective"  # Megatron-Core's default module: the same setting, written one way
    return "selective:" + "+".join(x for x in RECOMPUTE_MODULES if x in names)


class LengthSpread(Strict):
    """A length as a distribution: its mean and coefficient of variation (standard deviation / mean)."""

    mean: PosFloat
    cv: float = Field(default=0.0, ge=0, le=100)  # 0: every request has the mean


def _length_kind(value) -> str:
    return "spread" if isinstance(value, (dict, LengthSpread)) else "tokens"


# a number of tokens or a {mean, cv} mapping (the tag names the branch, so errors speak of the one given)
Length = Annotated[Annotated[PosInt, Tag("tokens")] | Annotated[LengthSpread, Tag("spread")],
                   Discriminator(_length_kind)]


class WorkloadSpec(declared_model(WorkloadSettings, "WorkloadSettings")):
    """The ``workload`` section: its plain settings are declared in engine/settings.py (``WorkloadSettings``);
    the precision, the lengths and the request mix, which take a mapping, a distribution or a list, here."""

    # one precision for weights and GEMM inputs, ``native`` (the model's published precision), or by
    # component (spec/model.py PrecisionSpec)
    precision: PrecisionName | Literal["native"] | PrecisionSpec = "bf16"
    input_len: Length | None = None  # tokens, or {mean, cv} (serving)
    output_len: Length | None = None
    # serving: the request mix as (input, output) token pairs, equally likely (instead of the two lengths)
    requests: list[tuple[PosInt, PosInt]] | None = Field(default=None, min_length=1, max_length=100_000)

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        if self.requests is not None and (self.input_len is not None or self.output_len is not None):
            raise ValueError("requests: give either the (input, output) pairs or input_len and output_len")
        if self.requests is not None and self.mode != "serving":
            raise ValueError("requests: a request mix needs mode serving (static batches have fixed lengths)")
        for key in ("input_len", "output_len"):
            if isinstance(getattr(self, key), LengthSpread) and self.mode != "serving":
                raise ValueError(f"{key}: a length distribution needs mode serving (static batches have "
                                 "fixed lengths)")
        if self.mode == "training" and self.global_batch_size is None:
            raise ValueError("training needs global_batch_size (sequences per optimizer step)")
        if self.mode in ("inference", "serving") and self.requests is None and (
                self.input_len is None or self.output_len is None):
            raise ValueError(f"{self.mode} needs input_len and output_len (tokens per sequence)")
        if self.mode == "serving" and (self.concurrency is None) == (self.request_rate_per_s is None):
            raise ValueError("serving needs one of concurrency (requests in flight over the deployment) and "
                             "request_rate_per_s (Poisson arrivals)")
        if self.num_prompts is not None and (self.mode != "serving" or self.concurrency is None):
            raise ValueError("num_prompts: a benchmark's start burst is modelled for mode serving at a concurrency "
                             "(a closed loop); leave num_prompts out otherwise")
        if self.num_prompts is not None and self.num_prompts < self.concurrency:
            raise ValueError(f"num_prompts {self.num_prompts:,} is fewer than the concurrency "
                             f"{self.concurrency:,}: the client never has that many in flight; allowed: at least "
                             f"{self.concurrency:,}")
        if self.mode == "serving" and self.length_moments()["output_len"] < 2:
            raise ValueError("serving needs output_len of at least 2 (a first token and a decode step)")
        return self

    def length_moments(self) -> dict:
        """Mean input and output lengths (tokens), their coefficients of variation and their correlation:
        fixed lengths have cv 0; {mean, cv} lengths are independent; a list of pairs gives its own
        (population moments, each pair equally likely)."""
        if self.requests is not None:
            a = np.asarray(self.requests, dtype=float)
            mean, sd = a.mean(axis=0), a.std(axis=0)
            corr = float(np.corrcoef(a.T)[0, 1]) if (sd > 0).all() else 0.0
            return {"input_len": float(mean[0]), "output_len": float(mean[1]), "input_len_cv": float(sd[0] / mean[0]),
                    "output_len_cv": float(sd[1] / mean[1]), "length_corr": corr}
        out = {"length_corr": 0.0}
        for key in ("input_len", "output_len"):
            v = getattr(self, key)
            spread = isinstance(v, LengthSpread)
            out[key] = v.mean if spread else (v or 0)
            out[f"{key}_cv"] = v.cv if spread else 0.0
        return out


# the ``cost`` and ``reliability`` sections: settings, defaults and sources declared in engine/settings.py
CostSpec = declared_model(CostRates, "CostSpec")
ReliabilitySpec = declared_model(Reliability, "ReliabilitySpec")


class PoolSpec(Strict):
    """One pool of a disaggregated deployment: the split of each of its replicas (``ep`` and
    ``attention_dp`` as ``parallel.ep`` and ``parallel.attention_dp`` are for a co-located replica)."""

    tp: Degree = 1
    pp: Degree = 1
    ep: Degree = 1
    attention_dp: bool = False


class DisaggregationSpec(Strict):
    """Prefill and decode on separate pools of replicas (DistServe, Zhong et al. 2024, arXiv 2401.09670;
    Splitwise, Patel et al. 2024, ISCA; Mooncake; NVIDIA Dynamo), each request's KV cache sent between them."""

    prefill: PoolSpec = PoolSpec()
    decode: PoolSpec = PoolSpec()
    # devices of the prefill pool, the decode pool gets the rest of system.num_devices; auto: the split
    # (in whole replicas) that serves most within the SLO (without one: the highest throughput)
    prefill_devices: Degree | Literal["auto"] = "auto"
    # when the KV cache moves: after the prefill, whole (what vLLM's NIXL connector and TensorRT-LLM's cache
    # transceiver do by default), or layer by layer as each layer's keys and values are complete, under the
    # rest of the prefill (Splitwise, Patel et al., ISCA 2024; Mooncake's layer-wise prefill)
    kv_transfer: Literal["after_prefill", "layerwise"] = "after_prefill"


class SpeculativeSpec(Strict):
    """Speculative decoding with a draft head (EAGLE, Li et al. 2024; DeepSeek-V3 multi-token prediction)
    or a separate draft model (Leviathan et al. 2023; Chen et al. 2023): ``draft_tokens`` proposed per step,
    each kept with probability ``acceptance_rate`` (engine/speculative.py)."""

    # k; EAGLE-2 and vLLM's examples propose 3-5; beyond 16 a position-independent acceptance rate means little
    draft_tokens: int = Field(default=3, gt=0, le=16)
    # per-token acceptance: no default a source could give for every model and prompt; measure it (vLLM
    # and SGLang log it) and set it
    acceptance_rate: float = Field(gt=0, lt=1)
    # target-shaped layers in the draft head: 1 for EAGLE and for DeepSeek-V3's MTP module
    draft_layers: PosInt = 1
    # a separate draft model (a model preset name or mapping, e.g. llama3.2-1b for Llama 3.1 70B) instead
    # of a head: all its layers and its own output layer run per drafted token, on the target's tp ranks
    draft_model: ModelSpec | None = None
    # a draft model runs from its own checkpoint (vLLM's speculative_config takes the draft's own
    # quantization; TensorRT-LLM builds the draft engine apart), whatever the target's precision: unset, the
    # precision its preset is published in (gpt-oss-20b's MXFP4 experts), else bf16; a name or a mapping as
    # workload.precision takes. A draft head is part of the target and runs at its precision.
    draft_precision: PrecisionName | PrecisionSpec | None = None

    @model_validator(mode="after")
    def _one_kind_of_draft(self):
        if self.draft_model is not None and "draft_layers" in self.model_fields_set:
            raise ValueError("draft_layers is for a draft head; a draft_model runs all "
                             f"{self.draft_model.layers} of its own layers: leave draft_layers out")
        if self.draft_model is None and "draft_precision" in self.model_fields_set:
            raise ValueError("draft_precision is for a draft_model; a draft head runs at the target's precision")
        return self

    def draft_precision_spec(self) -> PrecisionSpec:
        """The draft model's precision by component: as given, else its preset's published one, else bf16."""
        given = self.draft_precision
        if given is None:
            return (self.draft_model.precision if self.draft_model is not None and self.draft_model.precision
                    else PrecisionSpec(activations="bf16"))
        return PrecisionSpec(activations=given) if isinstance(given, str) else given


class ServingSpec(declared_model(ServingSettings, "ServingSettings")):
    """The ``serving`` section: the scheduler's settings are declared in engine/settings.py
    (``ServingSettings``); disaggregated pools and speculative decoding here."""

    disaggregation: DisaggregationSpec | None = None  # none: every replica prefills and decodes
    speculative: SpeculativeSpec | None = None  # none: one token per request per decode step


class SystemSpec(Strict):
    accelerator: AcceleratorSpec
    num_devices: Degree
    network: NetworkSpec

    @model_validator(mode="after")
    def _check(self) -> SystemSpec:
        reason = too_many_devices(self.network.name, self.network.tiers[-1].size, self.num_devices)[0]
        if reason is not None:
            raise ValueError(reason)
        return self


class ScenarioSpec(Strict):
    model: ModelSpec
    system: SystemSpec
    parallel: ParallelSpec = ParallelSpec()
    workload: WorkloadSpec
    cost: CostSpec = CostSpec()
    reliability: ReliabilitySpec = ReliabilitySpec()
    serving: ServingSpec = ServingSpec()

    def precision(self) -> PrecisionSpec:
        """``workload.precision`` by component: a name for weights, experts and activations alike, or the
        model's published precision (``native``)."""
        given = self.workload.precision
        if given == "native":
            if self.model.precision is None:
                raise ValueError(f"workload.precision native: model '{self.model.name}' has no published precision "
                                 "(its preset's precision key); allowed: bf16, fp16, fp8, fp4 or a mapping")
            return self.model.precision
        return PrecisionSpec(activations=given) if isinstance(given, str) else given

    @model_validator(mode="after")
    def _check(self) -> ScenarioSpec:
        w = self.workload
        precision = self.precision()
        acc, prec = self.system.accelerator, precision.activations
        if w.mode == "training":
            tokens, what = (w.global_batch_size or 1) * w.seq_len, "global_batch_size x seq_len"
        else:
            batch = w.batch_size if isinstance(w.batch_size, int) else 1
            lengths = w.length_moments()
            tokens = batch * (lengths["input_len"] + lengths["output_len"])
            what = "batch_size x (input_len + output_len)"
        if tokens * self.model.hidden * self.model.layers * 64 > 2**63:
            raise ValueError(f"workload: {what} = {tokens:,} tokens is too many for model '{self.model.name}' "
                             "(its bytes overflow 64-bit integers)")
        if getattr(acc.peak_tflops, prec) is None:
            have = [p for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4") if getattr(acc.peak_tflops, p)]
            if w.precision == "native":
                what = (f"workload.precision native: model '{self.model.name}' is published in {prec}, which "
                        f"accelerator '{acc.name}' does not support")
            else:
                key = "workload.precision" if isinstance(w.precision, str) else "workload.precision.activations"
                what = f"{key} {prec} is not supported by accelerator '{acc.name}'"
            raise ValueError(f"{what}; allowed: {', '.join(have)}; narrower weights run weight-only, e.g. "
                             f"workload.precision: {{activations: bf16, weights: {prec}}}")
        if not isinstance(w.precision, str) and w.precision.experts is not None and self.model.moe is None:
            raise ValueError(f"workload.precision.experts: model '{self.model.name}' has no experts; the weights of "
                             "a dense model are workload.precision.weights")
        if not precision.uniform and w.mode == "training":
            raise ValueError("workload.precision: weights or experts narrower than the activations are modelled "
                             "for inference and serving; training takes one precision (bf16, fp8, ...)")
        if precision.kv_cache is not None and w.kv_precision is not None and precision.kv_cache != w.kv_precision:
            raise ValueError(f"workload.kv_precision {w.kv_precision} and workload.precision.kv_cache "
                             f"{precision.kv_cache} differ; give one")
        kernel = self.parallel.attention_kernel
        measured = acc.measured_attention_tflops or {}
        if kernel != "auto" and measured and kernel not in measured:
            raise ValueError(f"parallel.attention_kernel '{kernel}' has no measurement for accelerator "
                             f"'{acc.name}'; allowed: auto, {', '.join(measured)}")
        if self.parallel.cuda_graphs != "full" and acc.vendor not in ("NVIDIA", "AMD"):
            raise ValueError(f"parallel.cuda_graphs {self.parallel.cuda_graphs} models PyTorch's kernel launches on "
                             f"a GPU; accelerator '{acc.name}' ({acc.vendor or 'no vendor'}) runs compiled steps; "
                             "allowed: full")
        if self.parallel.moe_gemm_kernel == "sm80" and acc.sm80_matmul_fraction is None:
            raise ValueError(f"parallel.moe_gemm_kernel sm80 has no measured rate on accelerator '{acc.name}' "
                             "(its preset has no sm80_matmul_fraction); allowed: native")
        if self.parallel.moe_gemm_kernel == "sm80" and prec not in ("bf16", "fp16"):
            raise ValueError(f"parallel.moe_gemm_kernel sm80 runs 16-bit GEMMs (Ampere's tensor cores have no "
                             f"FP8 or FP4), got workload.precision {prec}; allowed with sm80: bf16, fp16")
        for key, value, allowed in (("grad_reduce_dtype", self.parallel.grad_reduce_dtype, "auto, fp32"),
                                    ("optimizer_states", self.parallel.optimizer_states, "fp32")):
            if value not in allowed.split(", ") and prec not in BF16_PARAM_PRECISIONS:
                raise ValueError(f"parallel.{key} {value} needs bf16 parameters (workload.precision "
                                 f"{', '.join(BF16_PARAM_PRECISIONS)}), got {prec}; allowed: {allowed}")
        if self.parallel.attention_dp and (w.mode != "serving" or self.serving.disaggregation is not None
                                           or self.serving.speculative is not None):
            raise ValueError("parallel.attention_dp is modelled for workload.mode serving without speculative "
                             "decoding; disaggregated pools take their own (serving.disaggregation.decode."
                             "attention_dp); leave it out (false)")
        if w.num_prompts is not None and self.serving.disaggregation is not None:
            raise ValueError("workload.num_prompts: the start burst is modelled for co-located prefill and decode "
                             "(no serving.disaggregation); leave num_prompts out")
        if self.serving.speculative is not None and (w.mode != "serving" or self.serving.disaggregation):
            raise ValueError("serving.speculative is modelled for workload.mode serving with co-located prefill "
                             "and decode (no serving.disaggregation)")
        draft = self.serving.speculative.draft_model if self.serving.speculative else None
        draft_math = self.serving.speculative.draft_precision_spec().activations if draft is not None else None
        if draft_math is not None and getattr(acc.peak_tflops, draft_math) is None:
            have = [p for p in ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4") if getattr(acc.peak_tflops, p)]
            raise ValueError(f"serving.speculative.draft_precision {draft_math} is not supported by accelerator "
                             f"'{acc.name}'; allowed: {', '.join(have)}")
        if draft is not None and draft.vocab != self.model.vocab:
            raise ValueError(f"serving.speculative.draft_model '{draft.name}' has a vocabulary of {draft.vocab:,} "
                             f"tokens and the target '{self.model.name}' {self.model.vocab:,}: a draft proposes "
                             "the target's tokens, so it needs the target's tokenizer")
        return self
