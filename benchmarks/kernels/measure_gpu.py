"""Measure the kernel rates llmsim's per-operator model rests on, on the GPU this runs on.

    python benchmarks/kernels/measure_gpu.py OUT_DIR [--budget-s 300]

Writes one CSV per family to OUT_DIR (each row one timed kernel; times are medians of CUDA-event timings
with the L2 flushed before each launch, ``triton.testing.do_bench``):

- ``gemm.csv``: dense C[M,N] = A[M,K] B[K,N] in bf16 (cuBLAS through ``torch.matmul``) and fp8 e4m3
  with per-tensor scales (cuBLASLt through ``torch._scaled_mm``), over the shapes of transformer layers,
  a wave probe (N stepped by 128 at M = 8192) and a K probe;
- ``grouped_gemm.csv``: routed-expert GEMMs of fine-grained MoE models (G experts of m tokens each), as one
  grouped kernel (``torch._grouped_mm``, CUTLASS on sm90) and as one ``torch.matmul`` per expert, uniform
  and skewed routing;
- ``memory.csv``: device copies, row gathers and scatter-adds (MoE permute/unpermute), SwiGLU, RMSNorm;
- ``launch.csv``: host time per eager kernel launch and per node of a replayed CUDA graph;
- ``steady_gemm.csv``: the same GEMMs back to back in a replayed CUDA graph (median of 5 timings), cycling
  through enough weight copies to stream them from HBM (no launch gaps, no flush): dense bf16 and fp8, grouped bf16 and fp8
  (``torch._scaled_grouped_mm``, row-wise scales);
- ``backward_gemm.csv``: the input- and weight-gradient GEMMs of the same dense and grouped shapes, back to
  back in a replayed graph; ``backward_loop_gemm.csv``: the experts' ones as one GEMM per expert;
- ``moe_layer.csv``: one routed-expert MLP forward eager and as a replayed graph (host-bound or not);
- ``attention.csv``: ``scaled_dot_product_attention`` forward and backward (flash and cuDNN back ends),
  causal, head dim 128.

Each family stops at its share of ``--budget-s`` and writes what it has; an error in one shape is written in
its ``error`` column, not raised. ``env.json`` holds the device, clocks and library versions.
"""

# Each timed closure is called inside the loop iteration that defines it (B023 does not apply); a failed
# measurement is written in its row's ``error`` column rather than raised (S110, S112).
# ruff: noqa: B023, S110, S112

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

DEV = "cuda"


def bench(fn, rep_ms: float = 25.0, warmup_ms: float = 5.0) -> float:
    """Median seconds of one call of ``fn``, the L2 flushed before each (triton's do_bench)."""
    if DEV == "cpu":  # --dry: exercise the script's paths without a GPU
        fn()
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median") * 1e-3


class Writer:
    def __init__(self, path: Path, fields: list[str]):
        self.file = path.open("w", newline="")
        self.rows = csv.DictWriter(self.file, fieldnames=fields + ["error"], extrasaction="ignore")
        self.rows.writeheader()

    def row(self, **kw):
        self.rows.writerow(kw)
        self.file.flush()

    def close(self):
        self.file.close()


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:300]


# ---------------------------------------------------------------- dense GEMMs
# (N, K) of layer GEMMs: Llama-3 8B/70B q/o/fc1/fc2 per tp, DeepSeek-V3 shared/dense, Qwen3-30B-A3B and
# gpt-oss experts (as one expert's GEMM), square probes.
GEMM_NK = [(4096, 4096), (6144, 4096), (28672, 4096), (14336, 4096), (4096, 14336), (8192, 8192),
           (28672, 8192), (8192, 28672), (1536, 2048), (2048, 768), (5760, 2880), (2880, 2880),
           (4096, 7168), (7168, 2048), (16384, 16384)]
GEMM_M = [16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]


def gemm_shapes():
    for n, k in GEMM_NK:
        for m in GEMM_M:
            yield "layer", m, n, k
    for n in range(128, 8192 + 1, 128):  # wave probe: 8192/128 = 64 row tiles x N/128 column tiles
        yield "wave_n", 8192, n, 8192
    for k in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384):
        yield "k_probe", 8192, 8192, k
    for m in range(128, 4096 + 1, 128):  # wave probe along M at an expert-sized N, K
        yield "wave_m", m, 1536, 2048


def run_gemm(out: Path, deadline: float):
    w = Writer(out / "gemm.csv", ["probe", "dtype", "m", "n", "k", "time_s", "tflops"])
    fp8 = torch.float8_e4m3fn
    one = torch.ones((), device=DEV, dtype=torch.float32)
    for probe, m, n, k in gemm_shapes():
        for dtype in ("bf16", "fp8"):
            if time.time() > deadline:
                w.close()
                return
            try:
                a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
                b = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)  # weights [out, in], as nn.Linear
                if dtype == "bf16":
                    bt = b.t()
                    fn = lambda: torch.matmul(a, bt)
                else:
                    a8, b8 = a.to(fp8), b.to(fp8)
                    fn = lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                  out_dtype=torch.bfloat16)
                t = bench(fn)
                w.row(probe=probe, dtype=dtype, m=m, n=n, k=k, time_s=f"{t:.6e}", tflops=f"{2*m*n*k/t/1e12:.2f}")
            except Exception as e:  # noqa: BLE001
                w.row(probe=probe, dtype=dtype, m=m, n=n, k=k, error=_err(e))
            finally:
                a = b = None
    w.close()


# ---------------------------------------------------------------- grouped expert GEMMs
# (model, experts on the device G, K, N) of the up (gate+up fused) and down projections
MOE = [("qwen3-30b-a3b", 128, 2048, 1536, 768), ("qwen3-30b-a3b", 16, 2048, 1536, 768),
       ("deepseek-v3", 32, 7168, 4096, 2048), ("deepseek-v3", 8, 7168, 4096, 2048),
       ("gpt-oss-120b", 32, 2880, 5760, 2880), ("mixtral-8x7b", 8, 4096, 28672, 14336),
       ("qwen3-235b-a22b", 16, 4096, 3072, 1536)]
TOKENS_PER_EXPERT = [16, 64, 128, 256, 512, 1024, 2048, 4096]


def _grouped(a, b_gkn, offs):
    fn = getattr(torch.nn.functional, "grouped_mm", None) or torch._grouped_mm
    return fn(a, b_gkn, offs=offs)


def _weights_gkn(weights):
    """[G, K, N] operand of the grouped kernel: the [G, N, K] weights transposed (K contiguous), or a
    contiguous copy where the kernel refuses that layout."""
    g, _, k = weights.shape
    a = torch.randn(16 * g, k, device=DEV, dtype=torch.bfloat16)
    offs = torch.arange(16, 16 * g + 1, 16, device=DEV, dtype=torch.int32)
    for cand in (weights.transpose(-2, -1), weights.transpose(-2, -1).contiguous()):
        try:
            _grouped(a, cand, offs)
            return cand
        except Exception:  # noqa: BLE001
            continue
    return weights.transpose(-2, -1)


def _counts(g: int, m: int, skew: str, gen: torch.Generator) -> list[int]:
    total = g * m
    if skew == "uniform":
        return [m] * g
    # lognormal expert loads (sigma 0.5) rounded to multiples of 16, same total
    x = torch.exp(0.5 * torch.randn(g, generator=gen))
    c = [max(16, round(float(v) / float(x.sum()) * total / 16) * 16) for v in x]
    c[-1] = max(16, c[-1] + total - sum(c))
    return c


def run_grouped(out: Path, deadline: float):
    w = Writer(out / "grouped_gemm.csv", ["model", "proj", "kernel", "skew", "groups", "tokens_per_expert",
                                          "max_tokens", "n", "k", "time_s", "tflops"])
    gen = torch.Generator().manual_seed(0)
    for model, g, hidden, up_n, down_k in MOE:
        for proj, n, k in (("up", up_n, hidden), ("down", hidden, down_k)):
            weights = torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16)
            b_gkn = _weights_gkn(weights)
            for m in TOKENS_PER_EXPERT:
                if g * m * max(k, n) > 2**31:
                    continue
                for skew in ("uniform", "lognormal"):
                    counts = _counts(g, m, skew, gen)
                    total = sum(counts)
                    a = torch.randn(total, k, device=DEV, dtype=torch.bfloat16)
                    offs = torch.tensor(list(_cumsum(counts)), device=DEV, dtype=torch.int32)
                    kernels = ["grouped"] + (["loop"] if g <= 32 else [])
                    for kern in kernels:
                        if time.time() > deadline:
                            w.close()
                            return
                        row = dict(model=model, proj=proj, kernel=kern, skew=skew, groups=g, tokens_per_expert=m,
                                   max_tokens=max(counts), n=n, k=k)
                        try:
                            if kern == "grouped":
                                fn = lambda: _grouped(a, b_gkn, offs)
                            else:
                                parts = list(torch.split(a, counts))
                                wt = [weights[i].t() for i in range(g)]
                                fn = lambda: [torch.matmul(p, q) for p, q in zip(parts, wt)]
                            t = bench(fn)
                            w.row(**row, time_s=f"{t:.6e}", tflops=f"{2*total*n*k/t/1e12:.2f}")
                        except Exception as e:  # noqa: BLE001
                            w.row(**row, error=_err(e))
            weights = b_gkn = None
    w.close()


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


# ---------------------------------------------------------------- memory-bound kernels
def run_memory(out: Path, deadline: float):
    w = Writer(out / "memory.csv", ["op", "tokens", "hidden", "bytes_moved", "time_s", "gb_per_s"])
    bf = torch.bfloat16
    for tokens, hidden in ((4096, 2048), (16384, 2048), (16384, 4096), (65536, 4096), (16384, 7168),
                           (65536, 7168), (1024, 7168)):
        if time.time() > deadline:
            break
        x = torch.randn(tokens, hidden, device=DEV, dtype=bf)
        e = tokens * hidden * 2
        idx8 = torch.randint(0, tokens, (tokens * 8,), device=DEV)  # top-8 permute: 8 copies of each row
        up = torch.randn(tokens, 2 * hidden, device=DEV, dtype=bf)
        wgt = torch.ones(hidden, device=DEV, dtype=bf)
        rep8, dst = x.repeat(8, 1), torch.zeros_like(x)
        cases = {
            "copy": (lambda: x.clone(), 2 * e),
            "gather_top8": (lambda: x.index_select(0, idx8), 8 * e * 2),
            "scatter_add_top8": (lambda: dst.index_add_(0, idx8, rep8), 8 * e + 2 * e),
            "swiglu": (lambda: torch.nn.functional.silu(up[:, :hidden]) * up[:, hidden:], 2 * e + e),
            "rmsnorm": (lambda: torch.nn.functional.rms_norm(x, (hidden,), wgt), 2 * e),
            "add": (lambda: x + x, 3 * e),
        }
        for op, (fn, nbytes) in cases.items():
            try:
                t = bench(fn)
                w.row(op=op, tokens=tokens, hidden=hidden, bytes_moved=nbytes, time_s=f"{t:.6e}",
                      gb_per_s=f"{nbytes/t/1e9:.1f}")
            except Exception as ex:  # noqa: BLE001
                w.row(op=op, tokens=tokens, hidden=hidden, error=_err(ex))
        x = up = idx8 = rep8 = dst = None
    w.close()


# ---------------------------------------------------------------- kernels back to back (steady state)
REPEATS = 5  # timings of ``reps`` replays each; their median is reported


def _warm_up(seconds: float = 2.0) -> None:
    """Large GEMMs for ``seconds``: the clocks leave idle (345 MHz) before the first timing."""
    if DEV != "cuda":
        return
    a = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    t0 = time.time()
    while time.time() - t0 < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


def _capture(fn):
    """``fn`` captured in a CUDA graph, after one warm-up call on a side stream (as PyTorch's docs do it)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def _replay_s(fn, reps: int = 10) -> float:
    """Seconds of one call of ``fn`` captured in a CUDA graph and replayed ``reps`` times back to back: no
    host launch gaps, no L2 flush; ``fn`` cycles through enough weights that they stream from HBM."""
    if DEV == "cpu":
        return bench(fn)
    fn()
    torch.cuda.synchronize()
    graph = _capture(fn)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(REPEATS):
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / reps)
    return sorted(times)[len(times) // 2]


def _eager_s(fn, reps: int = 10) -> tuple[float, float]:
    """(GPU seconds between events, wall seconds) of one eager call of ``fn``, ``reps`` calls back to back."""
    if DEV == "cpu":
        return bench(fn), bench(fn)
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3 / reps, (time.perf_counter() - t0) / reps


STEADY_NK = [(1536, 2048), (2048, 768), (4096, 4096), (14336, 4096), (28672, 8192), (7168, 2048)]
STEADY_M = [1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192]


def run_steady(out: Path, deadline: float):
    w = Writer(out / "steady_gemm.csv", ["family", "dtype", "groups", "m", "n", "k", "copies", "time_s", "tflops"])
    fp8 = torch.float8_e4m3fn
    one = torch.ones((), device=DEV, dtype=torch.float32)
    for n, k in STEADY_NK:
        copies = int(min(64, max(4, math.ceil(400e6 / (n * k)))))
        ws = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(copies)]
        w8 = [x.to(fp8) for x in ws]
        for m in STEADY_M:
            a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
            a8 = a.to(fp8)
            for dtype in ("bf16", "fp8"):
                if time.time() > deadline:
                    w.close()
                    return
                row = dict(family="dense", dtype=dtype, groups=1, m=m, n=n, k=k, copies=copies)
                try:
                    if dtype == "bf16":
                        fn = lambda: [torch.matmul(a, x.t()) for x in ws]
                    else:
                        if m % 16:
                            continue
                        fn = lambda: [torch._scaled_mm(a8, x.t(), scale_a=one, scale_b=one,
                                                       out_dtype=torch.bfloat16) for x in w8]
                    t = _replay_s(fn) / copies
                    w.row(**row, time_s=f"{t:.6e}", tflops=f"{2*m*n*k/t/1e12:.2f}")
                except Exception as e:  # noqa: BLE001
                    w.row(**row, error=_err(e))
        ws = w8 = None
        torch.cuda.empty_cache()
    for model, g, hidden, up_n, down_k in MOE[:3] + MOE[4:5]:
        for proj, n, k in (("up", up_n, hidden), ("down", hidden, down_k)):
            copies = int(min(8, max(2, math.ceil(400e6 / (g * n * k)))))
            ws = [torch.randn(g, n, k, device=DEV, dtype=torch.bfloat16) for _ in range(copies)]
            gkn = [_weights_gkn(x) for x in ws]
            w8 = [x.to(fp8).transpose(-2, -1) for x in ws]
            sb = torch.ones(g, n, device=DEV, dtype=torch.float32)
            for m in (16, 64, 128, 256, 512, 1024, 2048):
                if g * m * max(n, k) > 2**31:
                    continue
                a = torch.randn(g * m, k, device=DEV, dtype=torch.bfloat16)
                a8 = a.to(fp8)
                sa = torch.ones(g * m, device=DEV, dtype=torch.float32)
                offs = torch.arange(m, g * m + 1, m, device=DEV, dtype=torch.int32)
                for dtype in ("bf16", "fp8"):
                    if time.time() > deadline:
                        w.close()
                        return
                    row = dict(family=f"grouped:{model}:{proj}", dtype=dtype, groups=g, m=m, n=n, k=k, copies=copies)
                    try:
                        if dtype == "bf16":
                            fn = lambda: [_grouped(a, x, offs) for x in gkn]
                        else:
                            fn = lambda: [torch._scaled_grouped_mm(a8, x, sa, sb, offs=offs,
                                                                   out_dtype=torch.bfloat16) for x in w8]
                        t = _replay_s(fn) / copies
                        w.row(**row, time_s=f"{t:.6e}", tflops=f"{2*g*m*n*k/t/1e12:.2f}")
                    except Exception as e:  # noqa: BLE001
                        w.row(**row, error=_err(e))
            ws = gkn = w8 = None
            torch.cuda.empty_cache()
    w.close()


# ---------------------------------------------------------------- backward GEMMs (steady state)
def run_backward(out: Path, deadline: float):
    """The two backward GEMMs of a linear layer Y[M,N] = X[M,K] W[N,K]^T, back to back in a graph: the input
    gradient dX = dY W (output M x K, reduces over N) and the weight gradient dW = dY^T X (output N x K,
    reduces over the M tokens); for routed experts as grouped GEMMs (``torch._grouped_mm``: 2d x 3d for dX,
    2d x 2d with offsets along the tokens for dW)."""
    w = Writer(out / "backward_gemm.csv", ["family", "pass", "groups", "m", "n", "k", "copies", "time_s", "tflops"])
    bf = torch.bfloat16
    for n, k in STEADY_NK:
        copies = int(min(64, max(4, math.ceil(400e6 / (n * k))))) if DEV == "cuda" else 1
        ws = [torch.randn(n, k, device=DEV, dtype=bf) for _ in range(copies)]
        for m in (128, 512, 2048, 8192):
            dy = torch.randn(m, n, device=DEV, dtype=bf)
            x = torch.randn(m, k, device=DEV, dtype=bf)
            for kind, fn in (("dgrad", lambda: [torch.matmul(dy, q) for q in ws]),
                             ("wgrad", lambda: [torch.matmul(dy.t(), x) for _ in ws])):
                if time.time() > deadline:
                    w.close()
                    return
                row = {"family": "dense", "pass": kind, "groups": 1, "m": m, "n": n, "k": k, "copies": copies}
                try:
                    t = _replay_s(fn) / copies
                    w.row(**row, time_s=f"{t:.6e}", tflops=f"{2*m*n*k/t/1e12:.2f}")
                except Exception as e:  # noqa: BLE001
                    w.row(**row, error=_err(e))
        ws = None
        torch.cuda.empty_cache()
    fn_mm = getattr(torch.nn.functional, "grouped_mm", None) or torch._grouped_mm

    def grouped(g, m, wt, dy, x):
        offs = torch.arange(m, g * m + 1, m, device=DEV, dtype=torch.int32)
        dyt = dy.t().contiguous().t()  # column-major copy: dY^T row-major for the token-offset GEMM
        return (("dgrad", lambda: fn_mm(dy, wt, offs=offs)), ("wgrad", lambda: fn_mm(dyt.t(), x, offs=offs)))

    _expert_backward(w, deadline, "grouped", MOE[:3] + MOE[4:5], grouped)
    w.close()


def run_backward_loop(out: Path, deadline: float):
    """The routed experts' backward GEMMs as Transformer Engine's GroupedLinear runs them: one cuBLAS GEMM per
    expert (``torch.matmul`` on each expert's rows), back to back in a replayed graph."""
    w = Writer(out / "backward_loop_gemm.csv", ["family", "pass", "groups", "m", "n", "k", "copies", "time_s", "tflops"])

    def loop(g, m, wt, dy, x):
        dys, xs = dy.split(m), x.split(m)
        return (("dgrad", lambda: [torch.matmul(a, b) for a, b in zip(dys, wt)]),
                ("wgrad", lambda: [torch.matmul(a.t(), b) for a, b in zip(dys, xs)]))

    _expert_backward(w, deadline, "loop", [c for c in MOE if c[1] <= 32], loop)
    w.close()


def _expert_backward(w: Writer, deadline: float, prefix: str, configs, cases) -> None:
    """Time the (pass, callable) ``cases(g, m, W[G,N,K], dY, X)`` of each expert shape of ``configs``."""
    bf = torch.bfloat16
    for model, g, hidden, up_n, down_k in configs:
        for proj, n, k in (("up", up_n, hidden), ("down", hidden, down_k)):
            wt = torch.randn(g, n, k, device=DEV, dtype=bf)  # W[G, N, K]: dX = dY W is [M, N] x [N, K]
            for m in (16, 64, 128, 256, 512, 1024, 2048):
                if g * m * max(n, k) > 2**31:
                    continue
                dy = torch.randn(g * m, n, device=DEV, dtype=bf)
                x = torch.randn(g * m, k, device=DEV, dtype=bf)
                for kind, fn in cases(g, m, wt, dy, x):
                    if time.time() > deadline:
                        return
                    row = {"family": f"{prefix}:{model}:{proj}", "pass": kind, "groups": g, "m": m, "n": n, "k": k,
                           "copies": 1}
                    try:
                        t = _replay_s(fn)
                        w.row(**row, time_s=f"{t:.6e}", tflops=f"{2*g*m*n*k/t/1e12:.2f}")
                    except Exception as e:  # noqa: BLE001
                        w.row(**row, error=_err(e))
            wt = None
            torch.cuda.empty_cache()


# ---------------------------------------------------------------- one MoE layer, eager against graph
def run_moe_layer(out: Path, deadline: float):
    """Forward of a routed-expert MLP as Megatron-Core runs it without CUDA graphs (router GEMM, softmax,
    top-k, permute, grouped up GEMM, SwiGLU, grouped down GEMM, weighted unpermute), routing forced to
    balance, at Qwen3-30B-A3B's sizes (hidden 2048, 128 experts of 768, top-8) and DeepSeek-V3's per-EP8
    share (hidden 7168, 32 local experts of 2048, top-8 of 256 seen as 1 of 32 local: 2 rows a token)."""
    w = Writer(out / "moe_layer.csv", ["model", "tokens", "experts", "top_k", "mode", "kernels", "gpu_s", "wall_s"])
    bf = torch.bfloat16
    for model, hidden, experts, ffn, top_k in (("qwen3-30b-a3b", 2048, 128, 768, 8),
                                               ("deepseek-v3-ep8", 7168, 32, 2048, 2)):
        for tokens in (1024, 4096, 16384):
            if time.time() > deadline:
                break
            x = torch.randn(tokens, hidden, device=DEV, dtype=bf)
            wr = torch.randn(experts, hidden, device=DEV, dtype=bf)
            w1 = _weights_gkn(torch.randn(experts, 2 * ffn, hidden, device=DEV, dtype=bf))
            w2 = _weights_gkn(torch.randn(experts, hidden, ffn, device=DEV, dtype=bf))
            rows = tokens * top_k
            each = rows // experts
            offs = torch.arange(each, rows + 1, each, device=DEV, dtype=torch.int32)
            forced = ((torch.arange(tokens, device=DEV)[:, None] * top_k + torch.arange(top_k, device=DEV))
                      % experts)

            def layer():
                logits = x @ wr.t()
                probs = logits.float().softmax(-1)
                topv, _ = probs.topk(top_k, dim=-1)
                flat = forced.flatten()
                order = flat.argsort(stable=True)
                src = order // top_k
                h = _grouped(x.index_select(0, src), w1, offs)
                h = torch.nn.functional.silu(h[:, :ffn]) * h[:, ffn:]
                y = _grouped(h, w2, offs) * topv.flatten()[order].unsqueeze(1).to(bf)
                return torch.zeros_like(x).index_add_(0, src, y)

            kernels = ""
            try:
                from torch.profiler import ProfilerActivity, profile

                layer()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    layer()
                    torch.cuda.synchronize()
                kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
            except Exception:  # noqa: BLE001
                pass
            base = dict(model=model, tokens=tokens, experts=experts, top_k=top_k, kernels=kernels)
            try:
                gpu, wall = _eager_s(layer, reps=20)
                w.row(**base, mode="eager", gpu_s=f"{gpu:.6e}", wall_s=f"{wall:.6e}")
                t = _replay_s(layer, reps=20)
                w.row(**base, mode="graph", gpu_s=f"{t:.6e}", wall_s=f"{t:.6e}")
            except Exception as e:  # noqa: BLE001
                w.row(**base, mode="eager", error=_err(e))
            x = wr = w1 = w2 = None
            torch.cuda.empty_cache()
    w.close()


# ---------------------------------------------------------------- launch costs
def run_launch(out: Path, deadline: float):
    w = Writer(out / "launch.csv", ["mode", "kernels", "elements", "wall_s", "per_kernel_s"])
    for elements in (1024, 1 << 20):
        x = torch.randn(elements, device=DEV)
        n = 2000

        def eager():
            y = x
            for _ in range(n):
                y = y + 1.0
            return y

        for mode in ("eager", "graph"):
            if time.time() > deadline:
                break
            try:
                if mode == "eager":
                    fn = eager
                else:
                    fn = _capture(eager).replay
                walls = []
                for _ in range(7):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    walls.append(time.perf_counter() - t0)
                wall = sorted(walls)[len(walls) // 2]
                w.row(mode=mode, kernels=n, elements=elements, wall_s=f"{wall:.6e}", per_kernel_s=f"{wall/n:.3e}")
            except Exception as e:  # noqa: BLE001
                w.row(mode=mode, kernels=n, elements=elements, error=_err(e))
    # host-side enqueue time alone: launches without waiting (queue far from full)
    x = torch.randn(1024, device=DEV)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        x.add_(1.0)
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    w.row(mode="enqueue_only", kernels=1000, elements=1024, wall_s=f"{t1-t0:.6e}", per_kernel_s=f"{(t1-t0)/1000:.3e}")
    w.close()


# ---------------------------------------------------------------- attention
def run_attention(out: Path, deadline: float):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    w = Writer(out / "attention.csv", ["backend", "pass", "batch", "seq", "heads", "head_dim", "time_s", "tflops"])
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    for seq in (512, 1024, 2048, 4096, 8192, 16384):
        batch, heads, d = max(1, 16384 // seq), 32, 128
        q, k, v = (torch.randn(batch, heads, seq, d, device=DEV, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        fwd_flops = 4 * batch * heads * seq * seq * d / 2  # causal: half the score matrix
        for name, be in backends.items():
            if time.time() > deadline:
                w.close()
                return
            try:
                with sdpa_kernel([be]):
                    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                    t_f = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
                    g = torch.randn_like(o)
                    t_fb = bench(lambda: torch.autograd.grad(
                        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g))
                w.row(backend=name, **{"pass": "fwd"}, batch=batch, seq=seq, heads=heads, head_dim=d,
                      time_s=f"{t_f:.6e}", tflops=f"{fwd_flops/t_f/1e12:.1f}")
                t_b = t_fb - t_f
                w.row(backend=name, **{"pass": "bwd"}, batch=batch, seq=seq, heads=heads, head_dim=d,
                      time_s=f"{t_b:.6e}", tflops=f"{2.5*fwd_flops/t_b/1e12:.1f}")
            except Exception as e:  # noqa: BLE001
                w.row(backend=name, **{"pass": "fwd"}, batch=batch, seq=seq, heads=heads, head_dim=d, error=_err(e))
    w.close()


def _smi(query: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              check=False, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return _err(e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--only", default="gemm,grouped,memory,launch,attention")
    ap.add_argument("--dry", action="store_true", help="run on the CPU to check the script (times meaningless)")
    args = ap.parse_args()
    if args.dry:
        global DEV
        DEV = "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    clocks = "clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu"
    gpu = DEV == "cuda"
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name() if gpu else "cpu",
           "sms": torch.cuda.get_device_properties(0).multi_processor_count if gpu else None,
           "cudnn": torch.backends.cudnn.version(),
           "smi_before": _smi(clocks), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    torch.backends.cuda.matmul.allow_tf32 = False
    share = {"gemm": 0.40, "grouped": 0.30, "memory": 0.08, "launch": 0.05, "attention": 0.17, "steady": 0.5,
             "moe_layer": 0.2, "backward": 0.5, "backward_loop": 0.5}
    _warm_up()
    t0 = time.time()
    for name in args.only.split(","):
        start = time.time()
        deadline = start + share[name] * args.budget_s
        try:
            {"gemm": run_gemm, "grouped": run_grouped, "memory": run_memory, "launch": run_launch,
             "attention": run_attention, "steady": run_steady, "moe_layer": run_moe_layer,
             "backward": run_backward, "backward_loop": run_backward_loop}[name](args.out, deadline)
        except Exception:  # noqa: BLE001
            env[f"{name}_error"] = traceback.format_exc()[-1500:]
        env[f"{name}_s"] = round(time.time() - start, 1)
        print(f"{name}: {time.time() - start:.1f} s", flush=True)
        if gpu:
            torch.cuda.empty_cache()
    env["smi_after"] = _smi(clocks)
    env["total_s"] = round(time.time() - t0, 1)
    (args.out / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
