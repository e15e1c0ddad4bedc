"""Schema of a scenario: one design point (model, system, parallel split, workload)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from llmsim.spec.base import PosInt, Strict
from llmsim.spec.hardware import AcceleratorSpec, NetworkSpec
from llmsim.spec.model import ModelSpec

ParallelDim = Literal["tp", "cp", "ep", "dp", "pp"]
DEFAULT_ORDER: tuple[str, ...] = ("tp", "cp", "ep", "dp", "pp")


class ParallelSpec(Strict):
    tp: PosInt = 1
    pp: PosInt = 1
    dp: PosInt | None = None  # derived as num_devices / (tp * pp * cp) when omitted
    cp: PosInt = 1
    ep: PosInt = 1
    sequence_parallel: bool = True
    flash_attention: bool = True  # fused attention (Dao et al. 2022); false: s x s scores in HBM
    attention_kernel: str = "auto"  # a kernel of the accelerator's measured_attention_tflops; auto: fastest
    tp_comm_overlap: bool = False  # TP collectives overlapped with GEMMs (Transformer Engine userbuffers)
    microbatch_size: PosInt = 1
    virtual_stages: PosInt = 1
    recompute: Literal["none", "selective", "full"] = "selective"
    zero_stage: int = Field(default=1, ge=0, le=3)
    order: list[ParallelDim] = list(DEFAULT_ORDER)

    @model_validator(mode="after")
    def _check(self) -> ParallelSpec:
        if sorted(self.order) != sorted(DEFAULT_ORDER):
            raise ValueError(f"order must list each of {', '.join(DEFAULT_ORDER)} exactly once")
        return self


class WorkloadSpec(Strict):
    mode: Literal["training", "inference"] = "training"
    precision: Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4"] = "bf16"
    seq_len: PosInt = 2048
    global_batch_size: PosInt | None = None  # sequences per optimizer step (training)
    batch_size: PosInt | Literal["max"] | None = None  # concurrent sequences (inference)
    input_len: PosInt | None = None
    output_len: PosInt | None = None
    kv_precision: Literal["fp32", "bf16", "fp16", "fp8", "fp4"] | None = None

    @model_validator(mode="after")
    def _check(self) -> WorkloadSpec:
        if self.mode == "training" and self.global_batch_size is None:
            raise ValueError("training needs global_batch_size (sequences per optimizer step)")
        if self.mode == "inference" and (self.input_len is None or self.output_len is None):
            raise ValueError("inference needs input_len and output_len (tokens per sequence)")
        return self


class SystemSpec(Strict):
    accelerator: AcceleratorSpec
    num_devices: PosInt
    network: NetworkSpec

    @model_validator(mode="after")
    def _check(self) -> SystemSpec:
        largest = self.network.tiers[-1].size
        if self.num_devices > largest:
            raise ValueError(
                f"num_devices ({self.num_devices}) exceeds the largest tier of network "
                f"'{self.network.name}' ({largest} devices)")
        return self


class ScenarioSpec(Strict):
    model: ModelSpec
    system: SystemSpec
    parallel: ParallelSpec = ParallelSpec()
    workload: WorkloadSpec

    @model_validator(mode="after")
    def _check(self) -> ScenarioSpec:
        kernel, acc = self.parallel.attention_kernel, self.system.accelerator
        measured = acc.measured_attention_tflops or {}
        if kernel != "auto" and measured and kernel not in measured:
            raise ValueError(f"parallel.attention_kernel '{kernel}' has no measurement for accelerator "
                             f"'{acc.name}'; allowed: auto, {', '.join(measured)}")
        return self
