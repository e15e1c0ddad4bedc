"""The 5D parallel split: derived degrees and the checks that make a split possible."""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmsim.spec.errors import SpecError
from llmsim.values import Scenario


@dataclass(frozen=True)
class Split:
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

    @property
    def degrees(self) -> dict[str, int]:
        """Degrees used to place ranks: ep is carved out of dp (expert data parallelism)."""
        if self.ep_in_tp:
            return {"tp": self.tp, "cp": self.cp, "ep": 1, "dp": self.dp, "pp": self.pp}
        return {"tp": self.tp, "cp": self.cp, "ep": self.ep, "dp": self.dp // self.ep, "pp": self.pp}


def resolve_split(sc: Scenario) -> Split:
    """Derive dp and the microbatch count; reject splits no framework can run (SpecError, exit 2)."""
    p, m, w, n = sc.parallel, sc.model, sc.workload, sc.num_devices
    inner = p.tp * p.pp * p.cp
    if n % inner:
        raise SpecError(f"num_devices ({n}) is not divisible by tp*pp*cp ({p.tp}*{p.pp}*{p.cp} = {inner})",
                        path="parallel")
    dp = p.dp if p.dp is not None else n // inner
    if inner * dp != n:
        raise SpecError(f"tp*pp*cp*dp = {inner * dp} must equal num_devices ({n})", path="parallel.dp")
    if m.heads % p.tp:
        raise SpecError(f"heads ({m.heads}) are not divisible by tp ({p.tp})", path="parallel.tp")
    if p.pp * p.virtual_stages > m.layers:
        raise SpecError(f"pp*virtual_stages ({p.pp}*{p.virtual_stages}) exceeds layers ({m.layers})",
                        path="parallel.pp")
    if p.ep > 1:
        if m.moe is None:
            raise SpecError(f"ep ({p.ep}) > 1 needs a mixture-of-experts model", path="parallel.ep")
        if m.moe.experts % p.ep:
            raise SpecError(f"experts ({m.moe.experts}) are not divisible by ep ({p.ep})", path="parallel.ep")
    # serving engines (TensorRT-LLM, vLLM, SGLang) spread the experts over the tensor-parallel ranks
    ep_in_tp = p.ep > 1 and w.mode == "inference" and dp % p.ep != 0 and p.tp % p.ep == 0
    if p.ep > 1 and dp % p.ep and not ep_in_tp:
        raise SpecError(f"dp ({dp}) is not divisible by ep ({p.ep}): expert parallelism is carved out of data "
                        "parallelism (inference: or out of tp, when ep divides tp)", path="parallel.ep")
    seq = w.seq_len if w.mode == "training" else (w.input_len or w.seq_len)
    if seq % p.cp:
        raise SpecError(f"seq_len ({seq}) is not divisible by cp ({p.cp})", path="parallel.cp")
    microbatches = 1
    if w.mode == "training":
        per_step = dp * p.microbatch_size
        if w.global_batch_size % per_step:
            raise SpecError(f"global_batch_size ({w.global_batch_size}) is not divisible by "
                            f"dp*microbatch_size ({dp}*{p.microbatch_size} = {per_step})",
                            path="workload.global_batch_size")
        microbatches = w.global_batch_size // per_step
    return Split(tp=p.tp, pp=p.pp, dp=dp, cp=p.cp, ep=p.ep, microbatch_size=p.microbatch_size,
                 microbatches=microbatches, virtual_stages=p.virtual_stages,
                 layers_per_stage=math.ceil(m.layers / p.pp), ep_in_tp=ep_in_tp)
