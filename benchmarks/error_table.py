"""The per-record error table the serving benchmarks print (serving_2026.py, serving_out_of_sample.py):
``--csv`` gives the rows as CSV, otherwise a markdown table of the TPOT, TTFT and throughput errors."""

from __future__ import annotations

import sys


def percent(e) -> str:
    return "-" if e is None else f"{100 * e:+.0f}%"


def print_table(table: list[dict], third: str, throughput: str) -> bool:
    """The table on stdout, its third column the rows' ``third`` key; True when it was written as CSV."""
    if "--csv" in sys.argv:
        import pandas as pd

        pd.DataFrame(table).to_csv(sys.stdout, index=False)
        return True
    print(f"| record | engine | {third} | TPOT error | TTFT error | {throughput} error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in table:
        if "error" in r:
            print(f"| {r['id']} | {r.get('engine') or '-'} | refused | {r['error']} | | |")
            continue
        print(f"| {r['id']} | {r['engine']} | {r[third]} | {percent(r['tpot_error'])} | {percent(r['ttft_error'])} | "
              f"{percent(r['throughput_error'])} |")
    return False
