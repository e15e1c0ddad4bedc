"""Published serving measurements held against `llmsim estimate --mode serving`, out of sample (one
of them, NIM's concurrency-1 point, is also a batch-1 decode record of the calibration set,
llmsim/data/decode_latency_runs.yaml).

    python benchmarks/serving_out_of_sample.py            # table on stdout
    python benchmarks/serving_out_of_sample.py --csv      # one row per record

Records: docs/research/serving_records.yaml (collected 2026-11-24 with their sources and caveats). A record
is used when it states its model, accelerator, tensor parallelism, input and output lengths and a
concurrency (closed loop); request-rate (open-loop) rows wait for the queueing model. TPOT is the
record's mean TPOT or, failing that, its mean inter-token latency.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from error_table import print_table

from llmsim.engine.errors import DesignError
from llmsim.spec.engines import ENGINES
from llmsim.spec.presets import PresetRegistry
from llmsim.study import records as est

RECORDS = Path(__file__).resolve().parent.parent / "docs" / "research" / "serving_records.yaml"
# (substring of the record's accelerator, preset, network preset)
HARDWARE = [("H200", "h200-sxm", "dgx-h200"), ("H100", "h100-sxm", "dgx-h100"),
            ("A100-SXM4", "a100-sxm-80gb", "dgx-a100"), ("MI300X", "mi300x", "mi300x-8")]
# (substring of the record's model name, model preset)
MODELS = [("DeepSeek-R1", "deepseek-r1"), ("DeepSeek-V3", "deepseek-v3"), ("405B", "llama3-405b"),
          ("Llama-3.3-70B", "llama3-70b"), ("Llama-3-70B", "llama3-70b"), ("Llama-3.1-8B", "llama3-8b"),
          ("Llama-2-70B", "llama2-70b"), ("LLaMA-2-70B", "llama2-70b"), ("Llama-2-7B", "llama2-7b"),
          ("Mixtral-8x7B", "mixtral-8x7b")]
PRECISIONS = {"fp8": "fp8", "bf16": "bf16", "fp16": "bf16"}


def _precision(text) -> str | None:
    """The precision a record's free text names first ("fp8 (ModelOpt)", "bf16 (default; not stated)")."""
    word = str(text).lower().split(" ")[0] if text else ""
    return PRECISIONS.get(word)


def _lookup(table, text):
    return next((v[1:] if len(v) > 2 else v[1] for v in table if v[0] in str(text)), None)


def scenario_overrides(rec: dict) -> list[str] | None:
    """`--set` overrides of a record's serving scenario, or None when the record cannot be modelled."""
    hw, model, w, p = rec["hardware"], rec["model"], rec["workload"], rec["parallel"]
    acc, name = _lookup(HARDWARE, hw.get("accelerator")), _lookup(MODELS, model.get("name"))
    prec = _precision((rec.get("precision") or {}).get("weights"))
    if None in (acc, name, prec, w.get("input_len"), w.get("output_len"), w.get("concurrency"), p.get("tp"),
                hw.get("count")) or w["output_len"] < 2:
        return None
    kv = _precision((rec.get("precision") or {}).get("kv_cache")) or prec
    return [f"model={name}", f"system.accelerator={acc[0]}", f"system.network={acc[1]}",
            f"system.num_devices={hw['count']}", f"parallel.tp={p['tp']}", f"parallel.pp={p.get('pp') or 1}",
            "parallel.ep=1", "workload.mode=serving", f"workload.precision={prec}",
            f"workload.kv_precision={kv}", f"workload.input_len={w['input_len']}",
            f"workload.output_len={w['output_len']}", f"workload.concurrency={w['concurrency']}",
            *([f"serving.engine={rec['engine']}"] if rec.get("engine") in ENGINES else []), *_v0_mla(rec, name)]


def _v0_mla(rec: dict, model: str) -> list[str]:
    """The scheduler of a vLLM V0 release (before 0.8) serving an MLA model: V0 turns chunked prefill off
    for MLA ("MLA is enabled; forcing chunked prefill and prefix caching to be disabled", vllm/config.py,
    0.7.1-0.7.3 logs), so its default scheduler runs prompts first (``Scheduler._schedule_default``) with a
    budget of max(max_model_len, 2048) tokens (``SchedulerConfig``; 163,840 for DeepSeek-R1)."""
    version = str(rec.get("engine_version") or "")
    if rec.get("engine") != "vllm" or not re.match(r"0\.[0-7]\.", version) or not model.startswith("deepseek"):
        return []
    return ["serving.chunked_prefill=false", "serving.scheduler=prefill_first", "serving.max_batch_tokens=163840"]


def rows() -> list[dict]:
    registry = PresetRegistry()
    out = []
    for rec in yaml.safe_load(RECORDS.read_text(encoding="utf-8")):
        sets = scenario_overrides(rec)
        if sets is None:
            continue
        try:
            got = est.record(est.load(None, registry, sets))
        except DesignError as err:
            out.append({"id": rec["id"], "error": str(err)})
            continue
        m = rec["metrics"]
        tpot = m.get("tpot_mean_s") or m.get("itl_mean_s")
        row = {"id": rec["id"], "engine": rec.get("engine"), "concurrency": rec["workload"]["concurrency"]}
        for key, measured, predicted in (("tpot", tpot, got["tpot_s"]), ("ttft", m.get("ttft_mean_s"), got["ttft_s"]),
                                         ("throughput", m.get("output_tokens_per_s_total"),
                                          got["throughput_tokens_per_s"])):
            row[f"{key}_measured"], row[f"{key}_predicted"] = measured, predicted
            row[f"{key}_error"] = predicted / measured - 1 if measured else None
        out.append(row)
    return out


def main() -> None:
    table = rows()
    if print_table(table, "concurrency", "throughput"):
        return
    for key in ("tpot", "ttft", "throughput"):
        errs = [abs(r[f"{key}_error"]) for r in table if r.get(f"{key}_error") is not None]
        if errs:
            print(f"\n{key}: mean absolute error {100 * sum(errs) / len(errs):.1f}% over {len(errs)} records",
                  end="")
    print()


if __name__ == "__main__":
    main()
