"""The 5D parallel split: derived degrees and the checks that make a split possible.

One table of checks serves one design point (``resolve_split``: DesignError, exit 2) and a column of
design points (``split_arrays``: numpy arrays, the first failing check's message per infeasible row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmsim.engine.columns import factorize
from llmsim.engine.errors import DesignError
from llmsim.engine.types import Scenario

# the numeric inputs a split is made of (sweeps vary them as arrays)
SPLIT_INPUTS = ("num_devices", "tp", "pp", "dp", "cp", "ep", "microbatch_size", "virtual_stages",
                "global_batch_size")


@dataclass(frozen=True)
class Split:
    """Degrees of one design point (ints), or of many (equal-length numpy arrays)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    microbatch_size: int
    microbatches: int  # per pipeline per optimizer step
    virtual_stages: int
    layers_per_stage: int  # the fullest stage (ceil)
    ep_in_tp: bool = False  # inference: experts spread over the tp group (expert tp = tp / ep)
    last_layers: int | None = None  # transformer layers of the last stage (default: what the others leave)
    etp: int | None = None  # ranks splitting each expert (expert tensor parallelism; default tp)

    @property
    def ep_folded(self):
        """Training: the expert layers have their own split, etp x ep x edp = tp x cp x dp (Megatron-Core
        MoE parallel folding), because ep does not divide dp."""
        return (self.ep > 1) & (self.dp % np.maximum(self.ep, 1) != 0) & ~np.asarray(self.ep_in_tp, dtype=bool)

    @property
    def expert_tp(self):
        return self.tp if self.etp is None else self.etp

    @property
    def expert_dp(self):
        """Replicas of each expert: dp x cp / ep, or tp x cp x dp / (etp x ep) when folded."""
        classic = self.dp * self.cp // np.maximum(self.ep, 1)
        return np.where(self.ep_folded, self.tp * self.cp * self.dp // np.maximum(self.expert_tp * self.ep, 1),
                        classic)

    def take(self, rows) -> Split:
        """The rows ``rows`` (an index array or mask) of a column of splits; scalar fields stay as they are."""
        return Split(**{f: (np.asarray(getattr(self, f))[rows] if np.ndim(getattr(self, f)) else getattr(self, f))
                        for f in Split.__dataclass_fields__})

    def as_column(self) -> Split:
        """This one split as a column of one row (what the array engine takes)."""
        return Split(**{f: np.array([getattr(self, f)]) for f in Split.__dataclass_fields__})

    @property
    def degrees(self) -> dict[str, int]:
        """Degrees used to place ranks: ep is carved out of dp (expert data parallelism)."""
        own = self.ep_in_tp | self.ep_folded  # experts not carved out of dp
        ep = np.where(own, 1, self.ep)
        dp = np.where(own, self.dp, self.dp // np.maximum(ep, 1))
        if np.ndim(self.tp) == 0:
            ep, dp = int(ep), int(dp)
        return {"tp": self.tp, "cp": self.cp, "ep": ep, "dp": dp, "pp": self.pp}


def inputs_of(sc: Scenario) -> dict:
    """The split inputs of one scenario, as Python numbers (dp None when derived)."""
    p, w = sc.parallel, sc.workload
    # microbatch_size and virtual_stages auto are resolved for training (study.modes.training.resolve_auto);
    # serving and inference have neither microbatches nor interleaving
    auto = lambda v: 1 if v == "auto" and w.mode != "training" else v
    return {"num_devices": sc.num_devices, "tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "ep": p.ep,
            "microbatch_size": auto(p.microbatch_size), "virtual_stages": auto(p.virtual_stages),
            "global_batch_size": w.global_batch_size}


def _checks(sc: Scenario, a: dict, dp, ep_in_tp, folds) -> list[tuple]:
    """(failing mask, message of row i, path) for each rule, in the order they are reported."""
    m, w = sc.model, sc.workload
    draft = sc.serving.speculative.draft_model if sc.serving.speculative else None  # runs on the tp ranks
    n, tp, pp, cp, ep, mb, v = (a[k] for k in ("num_devices", "tp", "pp", "cp", "ep", "microbatch_size",
                                               "virtual_stages"))
    inner = tp * pp * cp
    experts = m.moe.experts if m.moe else 1
    slots = m.layers + extra_stages(sc)  # embedding and loss counted as pipeline layers (Megatron-LM)
    # serving's mean prompt may be fractional (a request mix): cp splits its tokens rounded up
    seq = w.seq_len if w.mode == "training" else int(np.ceil(w.input_len or w.seq_len))
    per_step = dp * mb
    out = [
        (n % inner != 0, lambda i: f"num_devices ({n[i]}) is not divisible by tp*pp*cp "
                                   f"({tp[i]}*{pp[i]}*{cp[i]} = {inner[i]})", "parallel"),
        (inner * dp != n, lambda i: f"tp*pp*cp*dp = {inner[i] * dp[i]} must equal num_devices ({n[i]})",
         "parallel.dp"),
        (m.heads % tp != 0, lambda i: f"heads ({m.heads}) are not divisible by tp ({tp[i]})", "parallel.tp"),
        (draft.heads % tp != 0 if draft else False,
         lambda i: f"the draft model's heads ({draft.heads}) are not divisible by tp ({tp[i]})",
         "serving.speculative.draft_model"),
        (pp * v > slots, lambda i: f"pp*virtual_stages ({pp[i]}*{v[i]}) exceeds layers ({m.layers}"
                                   + (f" + {slots - m.layers} for the embedding and loss" if slots > m.layers else "")
                                   + ")", "parallel.pp"),
        ((ep > 1) & (m.moe is None), lambda i: f"ep ({ep[i]}) > 1 needs a mixture-of-experts model",
         "parallel.ep"),
        ((ep > 1) & (experts % ep != 0), lambda i: f"experts ({experts}) are not divisible by ep ({ep[i]})",
         "parallel.ep"),
        ((ep > 1) & (dp % ep != 0) & ~ep_in_tp & ~folds,
         lambda i: f"dp ({dp[i]}) is not divisible by ep ({ep[i]}): expert parallelism is carved out of data "
                   "parallelism (training: or folded over tp x cp x dp, when ep divides it; inference: or out "
                   "of tp, when ep divides tp)", "parallel.ep"),
        (seq % cp != 0, lambda i: f"seq_len ({seq}) is not divisible by cp ({cp[i]})", "parallel.cp"),
        # attention data-parallel (SGLang, TensorRT-LLM) runs the experts over the ranks that share the tokens
        ((ep > 1) & ~ep_in_tp & sc.parallel.attention_dp,
         lambda i: f"parallel.attention_dp runs the experts over the tp ranks: ep ({ep[i]}) must divide tp "
                   f"({tp[i]})", "parallel.ep"),
    ]
    if w.mode == "training":
        gbs = a["global_batch_size"]
        out.append((gbs % per_step != 0, lambda i: f"global_batch_size ({gbs[i]}) is not divisible by "
                    f"dp*microbatch_size ({dp[i]}*{mb[i]} = {per_step[i]})", "workload.global_batch_size"))
    return out


def extra_stages(sc: Scenario) -> int:
    """Pipeline layer slots taken by the embedding and by the loss (Megatron-LM
    --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split)."""
    p = sc.parallel
    return int(p.pipeline_embedding_stage) + int(p.pipeline_loss_stage)


def _divisors_descending(values: np.ndarray) -> list[int]:
    """Every integer that divides at least one of ``values`` (positive), largest first."""
    out: set[int] = {1}
    for v in np.unique(values).tolist():
        if v >= 1:
            r = np.arange(1, math.isqrt(v) + 1, dtype=np.int64)
            small = r[v % r == 0]
            out.update(small.tolist())
            out.update((v // small).tolist())
    return sorted(out, reverse=True)


def split_arrays(sc: Scenario, a: dict, explain: bool = True) -> tuple[Split, np.ndarray, list | None]:
    """The split of every row of ``a`` (SPLIT_INPUTS -> int arrays; dp may be absent or None: derived),
    a mask of the feasible rows, and per row the first failing check's (message, path) or None (all of
    them None without ``explain``: a sweep that drops infeasible rows formats no message)."""
    a = {k: np.asarray(v, dtype=np.int64) for k, v in a.items() if v is not None}
    inner = a["tp"] * a["pp"] * a["cp"]
    dp = a["dp"] if "dp" in a else a["num_devices"] // np.maximum(inner, 1)
    dp = np.maximum(dp, 1)
    ep, tp = a["ep"], a["tp"]
    # serving engines (TensorRT-LLM, vLLM, SGLang) spread the experts over the tensor-parallel ranks
    ep_in_tp = (ep > 1) & (sc.workload.mode != "training") & (dp % ep != 0) & (tp % ep == 0)
    failed = np.zeros(dp.shape, dtype=bool)
    reasons: list | None = [None] * dp.size if explain else None
    # training: expert layers folded over the tp x cp x dp ranks, each expert split over etp ranks, the
    # largest divisor of tp for which etp x ep divides them (Megatron-Core MoE parallel folding,
    # etp x ep x edp = tp x cp x dp), when ep does not divide dp
    world = tp * a["cp"] * dp
    etp = np.where(ep_in_tp, tp // np.maximum(ep, 1), tp)
    folded_etp = np.zeros_like(tp)
    for d in _divisors_descending(tp):  # a d dividing no tp changes nothing: only divisors are tried
        fits = (folded_etp == 0) & (tp % d == 0) & (world % (d * np.maximum(ep, 1)) == 0)
        folded_etp = np.where(fits, d, folded_etp)
    folds = (ep > 1) & (sc.workload.mode == "training") & (dp % np.maximum(ep, 1) != 0) & (folded_etp >= 1)
    etp = np.where(folds, folded_etp, etp)
    inputs = [np.broadcast_to(v, dp.shape) for v in a.values()]  # a row's message depends on these alone
    for mask, message, path in _checks(sc, a, dp, ep_in_tp, folds):
        if not explain:
            failed |= np.broadcast_to(mask, dp.shape)
            continue
        new = np.flatnonzero(np.broadcast_to(mask, dp.shape) & ~failed)
        if len(new):  # each distinct failing row's message formatted once
            code, first = factorize(*(k[new] for k in inputs))
            texts = [(message(new[j]), path) for j in first]
            for i, c in zip(new.tolist(), code.tolist(), strict=True):
                reasons[i] = texts[c]
            failed[new] = True
    microbatches = np.ones_like(dp)
    if sc.workload.mode == "training":
        microbatches = a["global_batch_size"] // np.maximum(dp * a["microbatch_size"], 1)
    pp, layers, e = a["pp"], sc.model.layers, int(sc.parallel.pipeline_embedding_stage)
    slots = layers + extra_stages(sc)  # layer slots, the embedding and the loss one each when counted
    per = -(-slots // pp)  # the fullest stage's slots
    # uneven splits: `full` stages hold per slots, the others per - 1, fuller stages first (Megatron-LM's
    # uneven pipeline split), so the last stage holds per - 1 slots unless every stage is full
    full = slots - pp * (per - 1)
    last_slots = np.where(full == pp, per, per - 1)
    first = np.where(pp > 1, per - e, layers)
    last = np.where(pp > 1, last_slots - int(sc.parallel.pipeline_loss_stage), layers)
    fullest = np.where(pp > 2, per, np.maximum(first, last))
    split = Split(tp=tp, pp=pp, dp=dp, cp=a["cp"], ep=ep, microbatch_size=a["microbatch_size"],
                  microbatches=microbatches, virtual_stages=a["virtual_stages"],
                  layers_per_stage=fullest, ep_in_tp=ep_in_tp, last_layers=last, etp=etp)
    return split, ~failed, reasons


def resolve_split(sc: Scenario) -> Split:
    """Derive dp and the microbatch count; reject splits no framework can run (DesignError, exit 2)."""
    a = {k: [v] for k, v in inputs_of(sc).items() if v is not None}
    split, ok, reasons = split_arrays(sc, a)
    if not ok[0]:
        message, path = reasons[0]
        raise DesignError(message, path=path)
    return Split(**{f: (bool(getattr(split, f)[0]) if f == "ep_in_tp" else int(getattr(split, f)[0]))
                    for f in Split.__dataclass_fields__})
