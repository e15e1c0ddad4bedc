"""Rich tables for one estimate: headline, time breakdown, memory breakdown, collectives."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from llmsim import schema
from llmsim.output.writers import fmt_number

TIME_ROWS = [
    ("compute (fwd + bwd + recompute + optimizer)", "compute_time_s"),
    ("tensor-parallel comm (exposed)", "tp_comm_time_s"),
    ("context-parallel comm (exposed)", "cp_comm_time_s"),
    ("expert-parallel all-to-all (exposed)", "ep_comm_time_s"),
    ("pipeline send/recv", "pp_comm_time_s"),
    ("data-parallel comm (exposed)", "dp_comm_exposed_time_s"),
    ("pipeline bubble", "bubble_time_s"),
    ("waiting for the slowest device", "straggler_time_s"),
    ("fixed per-step overhead", "overhead_time_s"),
]
MEMORY_ROWS = [
    ("weights", "weights_gb"), ("gradients", "grads_gb"), ("optimizer states", "optimizer_gb"),
    ("activations (incl. fragmentation)", "activations_gb"), ("runtime reserve", "reserved_gb"),
]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


INFERENCE_TIME_ROWS = [
    ("prefill compute", "prefill_compute_time_s"), ("prefill communication", "prefill_comm_time_s"),
]
DECODE_ROWS = [("decode compute", "decode_compute_time_s"), ("decode communication", "decode_comm_time_s")]
INFERENCE_MEMORY_ROWS = [
    ("weights", "weights_gb"), ("KV cache", "kv_cache_gb"), ("activation workspace", "activations_gb"),
    ("runtime reserve", "reserved_gb"),
]


def _headline(title: str, rec: dict, rows: list[tuple[str, str]]) -> Table:
    """The key figures of an estimate, with memory per device and whether it fits last."""
    head = Table(title=title, show_header=False, title_justify="left")
    head.add_column("metric")
    head.add_column("value", justify="right")
    for label, value in rows:
        head.add_row(label, value)
    fits = "[green]fits[/green]" if rec["fits_in_memory"] else "[bold red]DOES NOT FIT[/bold red]"
    head.add_row("memory per device", f"{fmt_number(rec['memory_per_device_gb'])} GB  {fits}")
    return head


def _cost_table(rec: dict) -> Table:
    """Capex, power and cost per token (``cost`` section of the scenario)."""
    table = Table(title="Cost (cost section of the scenario; devices at TDP)", show_header=False,
                  title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    # labels phrased for this table (a part of the capex "of which"); units as the schema declares them
    rows = [("device manufacturing cost", "device_cost_usd"), ("device price", "device_price_usd"),
            ("system capex", "system_capex_usd"), ("  of which scale-out network", "network_capex_usd"),
            ("system power (with PUE)", "system_power_w"), ("cost per hour", "cost_per_hour_usd"),
            ("energy per token", "energy_per_token_j"), ("cost per million tokens", "cost_per_million_tokens_usd"),
            ("  counting work lost to failures", "cost_per_million_goodput_tokens_usd")]
    for label, key in rows:
        if key not in rec:
            continue
        table.add_row(label, f"{fmt_number(rec.get(key))} {schema.BY_NAME[key].unit}")
    return table


def print_serving(rec: dict) -> None:
    """Continuous-batching serving in steady state (engine/serving.py)."""
    console = Console()
    title = (f"{rec['model']} serving on {rec['num_devices']} x {rec['accelerator']} ({rec['network']}), "
             f"tp={rec['tp']} pp={rec['pp']} dp={rec['dp']} ep={rec['ep']}"
             f"{' (attention data-parallel)' if rec.get('attention_dp') else ''}, {fmt_number(rec['concurrency'])} requests in "
             f"flight of ({rec['input_len']} in + {rec['output_len']} out) tokens, {rec['precision']}")
    rows = [
        ("time to first token (TTFT)", (f"{fmt_number(rec['ttft_s'] * 1e3)} ms"
                                       f" (of which queueing {fmt_number(rec['queueing_delay_s'] * 1e3)} ms)")),
        ("time per output token (TPOT)", (f"{fmt_number(rec['tpot_s'] * 1e3)} ms "
                                         f"({fmt_number(rec['tokens_per_s_per_user'])} tokens/s per user"
                                         + (f"; speculative: {fmt_number(rec['tokens_per_decode_step'])} tokens "
                                            "per decode step" + (f", drafted by {rec['speculative_draft_model']}"
                                                                 if rec.get("speculative_draft_model") else "")
                                            if rec.get("tokens_per_decode_step", 1) != 1 else "")
                                         + ")")),
        ("end-to-end latency", f"{fmt_number(rec['e2e_latency_s'])} s"),
        ("throughput", (f"{fmt_number(rec['throughput_tokens_per_s'])} output tokens/s "
                        f"({fmt_number(rec['throughput_tokens_per_s_per_device'])} per device, "
                        f"{fmt_number(rec['requests_per_s'])} requests/s)")),
        ("running per replica", (f"{fmt_number(rec['running_requests_per_replica'])} of at most "
                                f"{rec['max_running_requests_per_replica']} (KV cache "
                                f"{100 * rec['kv_cache_occupancy']:.0f}% full)"))]
    if "prefill_devices" in rec:
        rows.append(("disaggregated pools", (f"{rec['prefill_devices']} prefill (tp={rec['prefill_tp']}, "
                                            f"{100 * rec['prefill_utilization']:.0f}% busy) + {rec['decode_devices']} "
                                            f"decode devices (tp={rec['decode_tp']}); KV transfer "
                                            f"{fmt_number(rec['kv_transfer_time_s'] * 1e3)} ms over "
                                            f"{rec['kv_transfer_tier']}, "
                                            f"{fmt_number(rec['kv_transfer_exposed_s'] * 1e3)} ms of it after "
                                            "the prefill")))
    if (rec.get("scheduler") == "prefill_first" and not rec.get("output_len_cv") and "request_rate_per_s" not in rec
            and "prefill_devices" not in rec):
        rows.append(("scheduler", ("prefill first: the closed loop runs in waves, every prompt and then every "
                                   "request decoding together (engine/waves.py)")))
    if "colocated_slo_throughput_tokens_per_s_per_device" in rec:
        rows.append(("co-located, same SLO", (f"{fmt_number(rec['colocated_slo_throughput_tokens_per_s_per_device'])}"
                                             f" tokens/s per device (tp={rec['tp']} replicas on the same devices)")))
    if "tpot_p90_s" in rec and "request_rate_per_s" not in rec:
        ms = lambda key: " / ".join(fmt_number(rec[f"{key}_p{q}_s"] * 1e3) for q in (50, 90, 99))
        rows += [("TTFT p50 / p90 / p99", f"{ms('ttft')} ms"), ("TPOT p50 / p90 / p99", f"{ms('tpot')} ms")]
    if "request_rate_per_s" in rec:
        rows.append(("at a Poisson rate", (f"{fmt_number(rec['request_rate_per_s'])} requests/s, "
                                          f"{100 * rec['utilization']:.0f}% of capacity; TTFT p50/p90/p99 "
                                          f"{fmt_number(rec['ttft_p50_s'] * 1e3)} / {fmt_number(rec['ttft_p90_s'] * 1e3)}"
                                          f" / {fmt_number(rec['ttft_p99_s'] * 1e3)} ms")))
    if "slo_request_rate_per_s" in rec:
        rows.append(("within the SLO (p90)", (f"up to {fmt_number(rec['slo_request_rate_per_s'])} requests/s, "
                                             f"{fmt_number(rec['slo_throughput_tokens_per_s_per_device'])} "
                                             "tokens/s per device")))
    if "slo_concurrency" in rec:
        rows.append(("within the SLO", (f"up to {rec['slo_concurrency']} requests in flight, "
                                       f"{fmt_number(rec['slo_throughput_tokens_per_s_per_device'])} tokens/s "
                                       "per device")))
    console.print(_headline(title, rec, rows))
    console.print(_cost_table(rec))


def print_inference(rec: dict) -> None:
    console = Console()
    title = (f"{rec['model']} on {rec['num_devices']} x {rec['accelerator']} ({rec['network']}), "
             f"tp={rec['tp']} pp={rec['pp']} dp={rec['dp']} ep={rec['ep']}, batch {rec['batch_size']} x "
             f"({rec['input_len']} in + {rec['output_len']} out) tokens, {rec['precision']} "
             f"(KV {rec['kv_precision']})")
    console.print(_headline(title, rec, [
        ("time to first token (TTFT)", f"{fmt_number(rec['ttft_s'] * 1e3)} ms"),
        ("time per output token (TPOT)", f"{fmt_number(rec['tpot_s'] * 1e3)} ms"),
        ("end-to-end latency", f"{fmt_number(rec['e2e_latency_s'])} s"),
        ("throughput", (f"{fmt_number(rec['throughput_tokens_per_s'])} output tokens/s "
                       f"({fmt_number(rec['throughput_tokens_per_s_per_device'])} per device)"))]))
    console.print(_breakdown("Time to first token", "time (s)", INFERENCE_TIME_ROWS, rec, rec["ttft_s"], True))
    console.print(_breakdown("One decode step (mean over the output)", "time (s)", DECODE_ROWS, rec,
                             rec["tpot_s"], True))
    console.print(_breakdown("Memory per device", "GB", INFERENCE_MEMORY_ROWS, rec, rec["memory_per_device_gb"],
                             False))
    console.print(_cost_table(rec))
    if rec.get("tp_collective"):
        console.print(f"tensor-parallel all-reduce (decode): {rec['tp_collective']}")


def print_estimate(rec: dict) -> None:
    if rec.get("mode") == "serving":
        print_serving(rec)
        return
    if rec.get("mode") == "inference":
        print_inference(rec)
        return
    console = Console()
    title = (f"{rec['model']} on {rec['num_devices']} x {rec['accelerator']} ({rec['network']}), "
             f"tp={rec['tp']} pp={rec['pp']} dp={rec['dp']} cp={rec['cp']} ep={rec['ep']}, "
             f"mb={rec['microbatch_size']} x {rec['microbatches']}, {rec['precision']}, "
             f"recompute={rec['recompute']}, ZeRO-{rec['zero_stage']}")
    console.print(_headline(title, rec, [
        ("step time", f"{fmt_number(rec['step_time_s'])} s"),
        ("throughput", (f"{fmt_number(rec['tokens_per_s'])} tokens/s "
                       f"({fmt_number(rec['tokens_per_s_per_device'])} per device)")),
        ("MFU", f"{100 * rec['mfu']:.1f}%"),
        ("goodput", (f"{fmt_number(rec['goodput_tokens_per_s'])} tokens/s ({100 * rec['goodput_fraction']:.1f}%: "
                     f"failures, {fmt_number(rec['checkpoint_time_s'])} s checkpoints every "
                     f"{fmt_number(rec['checkpoint_interval_s'] / 3600)} h)")),
        ("model FLOPs per step", f"{fmt_number(rec['model_flops_per_step'])} FLOP")]))

    console.print(_breakdown("Step time breakdown", "time (s)", TIME_ROWS, rec, rec["step_time_s"], skip_zero=True))
    stage = {"first": "first pipeline stage", "last": "last pipeline stage"}.get(rec.get("memory_stage"), "busiest stage")
    console.print(_breakdown(f"Memory per device ({stage if rec['pp'] > 1 else 'one stage'})", "GB", MEMORY_ROWS,
                             rec, rec["memory_per_device_gb"], skip_zero=False))
    console.print(_cost_table(rec))
    coll = Table(title="Collectives (main operation of each parallel dimension)", title_justify="left")
    coll.add_column("dimension")
    coll.add_column("operation algorithm/protocol on tiers")
    for dim in ("tp", "dp", "ep", "pp"):
        if rec.get(f"{dim}_collective"):
            coll.add_row(dim, rec[f"{dim}_collective"])
    if coll.row_count:
        console.print(coll)


def _breakdown(title: str, unit: str, rows: list[tuple[str, str]], rec: dict, whole: float,
               skip_zero: bool) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("part")
    table.add_column(unit, justify="right")
    table.add_column("share", justify="right")
    for label, key in rows:
        if rec.get(key) or not skip_zero:
            table.add_row(label, fmt_number(rec[key]), _pct(rec[key], whole))
    table.add_row("[bold]total[/bold]", f"[bold]{fmt_number(whole)}[/bold]", "100%")
    return table


def print_operators(rows: list[dict]) -> None:
    """The ``--ops`` table: one block per phase."""
    from llmsim.output.writers import print_table

    headers = {"flops": "FLOPs", "bytes": "bytes", "intensity_flop_per_byte": "FLOP/byte",
               "ridge_flop_per_byte": "ridge FLOP/byte", "time_s": "time (s)", "time_share": "share"}
    cols = ["op", "flops", "bytes", "intensity_flop_per_byte", "ridge_flop_per_byte", "bound", "time_s",
            "time_share"]
    for phase in dict.fromkeys(r["phase"] for r in rows):
        block = [dict(r, time_share=f"{100 * r['time_share']:.1f}%") for r in rows if r["phase"] == phase]
        print_table(block, cols, title=f"Operators: {phase} (per device)", headers=headers)
