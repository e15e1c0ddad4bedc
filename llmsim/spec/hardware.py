"""Schema of an accelerator and of a network (ordered tiers)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, model_validator

from llmsim.spec.base import NonNegFloat, NonNegInt, PosFloat, PosInt, Sources, Strict

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


class PrecisionTflops(Strict):
    """Dense (no 2:4 sparsity) TFLOP/s per precision; a missing precision is unsupported."""

    fp32: PosFloat | None = None
    tf32: PosFloat | None = None
    bf16: PosFloat | None = None
    fp16: PosFloat | None = None
    fp8: PosFloat | None = None
    fp4: PosFloat | None = None


class AttentionTflops(Strict):
    """Measured fused-attention (FlashAttention-style) throughput, 16-bit, long causal sequences."""

    fwd: PosFloat
    bwd: PosFloat


class ChipletSpec(Strict):
    """One kind of logic die in the package (cost model)."""

    name: str
    count: PosInt = 1
    area_mm2: PosFloat
    node: str  # a logic node of presets/technology/logic.yaml, or one of its aliases
    stacked: bool = False  # bonded on top of another die (3D, e.g. SoIC): takes no interposer area


class AcceleratorSpec(Strict):
    name: str
    description: str = ""
    vendor: str = ""
    peak_tflops: PrecisionTflops
    measured_matmul_tflops: PrecisionTflops | None = None
    measured_attention_tflops: dict[str, AttentionTflops] | None = None  # by kernel: fa2, fa3, cudnn
    # compute rate of Ampere-generation (SM80, mma.sync) GEMM kernels over the device's own kernels, as
    # measured on the same problem (parallel.moe_gemm_kernel sm80); 1 on the A100, whose own they are
    sm80_matmul_fraction: float | None = Field(default=None, gt=0, le=1)
    hbm_capacity_gb: PosFloat
    hbm_bandwidth_tb_per_s: PosFloat
    hbm_generation: str | None = None
    hbm_stacks: NonNegInt | None = None
    hbm_sites: NonNegInt | None = None  # HBM places on the interposer (default hbm_stacks); H100: 6, 5 active
    sram_mb: NonNegFloat | None = None
    scaleup_bw_gb_per_s_per_dir: PosFloat
    scaleout_bw_gb_per_s_per_dir: PosFloat
    tdp_w: PosFloat | None = None  # unpublished for some TPUs
    process_node: str | None = None
    die_area_mm2: PosFloat | None = None
    num_dies: PosInt | None = None
    chiplets: list[ChipletSpec] | None = None  # logic dies by kind; default num_dies x die_area/num_dies
    package: Literal["cowos-s", "cowos-l", "organic"] | None = None  # presets/technology/packaging.yaml
    release_year: PosInt | None = None
    list_price_usd: PosFloat | None = None
    cloud_usd_per_hour: PosFloat | None = None
    # true for a part announced but not yet shipping: its figures are the vendor's projections (the
    # announcement is the source); absent for shipping parts
    projected: bool | None = None
    sources: Sources = {}

    @model_validator(mode="after")
    def _check(self) -> AcceleratorSpec:
        if all(getattr(self.peak_tflops, p) is None for p in PRECISIONS):
            raise ValueError("peak_tflops needs at least one precision (" + ", ".join(PRECISIONS) + ")")
        return self


Topology = Literal["switch", "full-mesh", "ring", "torus2d", "torus3d", "fat-tree", "dragonfly"]


class TierSpec(Strict):
    name: str
    size: PosInt
    topology: Topology
    bw_gb_per_s_per_dir: PosFloat
    latency_us: NonNegFloat
    # NCCL's LL-protocol step latency where a measured small-message all-reduce sets it; default
    # latency_us x calibration.PROTOCOLS['ll'] (NCCL's hwLat LL / Simple ratio)
    ll_latency_us: NonNegFloat | None = None
    oversubscription: PosFloat = 1.0
    in_network_reduction: bool = False
    dims: list[PosInt] | None = None
    radix: PosInt | None = None
    levels: PosInt | None = None
    rail_optimized: bool = False
    group_size: PosInt | None = None  # dragonfly: devices per group (all-to-all local links)
    global_bw_gb_per_s_per_dir: PosFloat | None = None  # dragonfly: a device's share of the global links

    @model_validator(mode="after")
    def _check(self) -> TierSpec:
        if self.oversubscription < 1:
            raise ValueError(f"oversubscription must be >= 1 (1 = full bisection), got {self.oversubscription}")
        if self.topology == "dragonfly" and (self.group_size is None or self.global_bw_gb_per_s_per_dir is None):
            raise ValueError("topology dragonfly needs group_size and global_bw_gb_per_s_per_dir")
        want = {"torus2d": 2, "torus3d": 3}.get(self.topology)
        if want is not None:
            if self.dims is None or len(self.dims) != want:
                raise ValueError(f"topology {self.topology} needs dims with {want} entries")
            if math.prod(self.dims) != self.size:
                raise ValueError(f"product of dims {self.dims} must equal size ({self.size})")
        return self


class NetworkSpec(Strict):
    name: str
    description: str = ""
    tiers: list[TierSpec]
    sources: Sources = {}

    @model_validator(mode="after")
    def _check(self) -> NetworkSpec:
        if not self.tiers:
            raise ValueError("a network needs at least one tier")
        for inner, outer in zip(self.tiers, self.tiers[1:]):
            if outer.size <= inner.size or outer.size % inner.size:
                raise ValueError(
                    f"tier '{outer.name}' size ({outer.size}) must be a larger multiple of "
                    f"tier '{inner.name}' size ({inner.size})")
        return self
