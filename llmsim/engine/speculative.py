"""Speculative decoding in a serving step (``serving.speculative``): a draft proposes ``k`` tokens per
request, the target verifies them in one forward over ``k + 1`` positions, and on average
``E = (1 - a^(k+1)) / (1 - a)`` of them are kept (Leviathan et al. 2023, arXiv 2211.17192, eq. 1; ``a``
the per-token acceptance rate, taken as independent of position).

The draft is either a head of ``draft_layers`` target-shaped layers and the target's output layer, run
``k`` times per step over one token of each request: EAGLE (Li et al. 2024, arXiv 2401.15077: one decoder
layer on the target's features) and DeepSeek-V3's multi-token prediction module (arXiv 2412.19437,
sec. 2.2: one transformer block and the shared output head); or a separate draft model (``draft_model``:
Leviathan et al. 2023; Chen et al. 2023, arXiv 2302.01318), all of whose layers and its own output layer
run per drafted token on the target's tensor-parallel ranks (vLLM's draft runs at the target's tp by
default; TensorRT-LLM's draft-target engines likewise), holding its weights and a KV cache of its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from llmsim.engine.types import Scenario


def queries(sc: Scenario) -> int:
    """Positions per request in a decode step: 1, or k + 1 when speculating (k drafted and one more)."""
    spec = sc.serving.speculative
    return 1 if spec is None else spec.draft_tokens + 1


def tokens_per_step(sc: Scenario) -> float:
    """Expected output tokens per request per decode step (Leviathan et al. 2023, eq. 1); 1 without."""
    spec = sc.serving.speculative
    if spec is None:
        return 1.0
    a, k = spec.acceptance_rate, spec.draft_tokens
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def draft_layers(sc: Scenario) -> int:
    """Layers a drafted token passes: the head's ``draft_layers``, or all of the draft model's."""
    spec = sc.serving.speculative
    if spec is None:
        return 0
    return spec.draft_layers if spec.draft_model is None else spec.draft_model.layers


def drafter(sc: Scenario) -> Scenario:
    """The scenario whose layers draft: the target's own shape (a head), or the draft model's (one token
    per request per pass, no speculation of its own)."""
    spec = sc.serving.speculative
    if spec is None or spec.draft_model is None:
        return sc
    # its own checkpoint's precision; its cache as the target's (the engine's one KV-cache setting)
    workload = dataclasses.replace(sc.workload, precision=spec.draft_precision,
                                   weight_precision=spec.draft_weight_precision,
                                   expert_precision=spec.draft_expert_precision, kv_precision=sc.workload.kv_cache)
    return dataclasses.replace(sc, model=spec.draft_model, workload=workload,
                               serving=dataclasses.replace(sc.serving, speculative=None))


def draft_time(sc: Scenario, per_layer, head, layer_comm):
    """The draft's part of a step: ``k`` sequential passes, each ``draft_layers`` layers (``per_layer``
    compute and ``layer_comm`` tensor-parallel communication per layer) and the output layer (``head``)."""
    spec = sc.serving.speculative
    if spec is None:
        return 0.0 * np.asarray(per_layer)
    return spec.draft_tokens * (draft_layers(sc) * (per_layer + layer_comm) + head)
