"""Random YAML documents never produce a traceback: only a SpecError or a valid scenario."""

import os
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from llmsim.spec.errors import SpecError
from llmsim.spec.load import load_scenario
from llmsim.spec.scenario import ScenarioSpec

KEYS = ["model", "system", "parallel", "workload", "accelerator", "num_devices", "network", "tp", "pp",
        "layers", "hidden", "heads", "moe", "experts", "top_k", "mode", "recompute", "global_batch_size",
        "llama3-8b", "h100-sxm", "dgx-h100", "x"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(KEYS))
documents = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)), max_leaves=25)

# Raw text that is often not valid YAML at all.
raw_text = st.text(alphabet=st.sampled_from(list("abc:-[]{}&*!|>'\"#\n 12.%@`")), max_size=80)


def _check(registry, tmp_path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    try:
        spec = load_scenario(path, registry)
    except SpecError as err:
        assert "\n" not in str(err)
    else:
        assert isinstance(spec, ScenarioSpec)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=documents)
def test_random_documents(registry, tmp_path, doc):
    _check(registry, tmp_path, yaml.safe_dump(doc))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=raw_text)
def test_random_text(registry, tmp_path, text):
    _check(registry, tmp_path, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(section=st.sampled_from(["parallel", "workload", "system"]),
       key=st.sampled_from(KEYS + ["dp", "cp", "ep", "zero_stage", "order", "seq_len"]), value=scalars)
def test_mutated_valid_scenario(registry, tmp_path, section, key, value):
    base = {"model": "llama3-8b", "system": {"accelerator": "h100-sxm", "num_devices": 64, "network": "dgx-h100"},
            "workload": {"global_batch_size": 128}, "parallel": {"tp": 8}}
    base.setdefault(section, {})[key] = value
    _check(registry, tmp_path, yaml.safe_dump(base))


# Issue 22: hostile scenario and sweep documents through the CLI entry point. Every case ends with exit status
# 0 or 2 (one error line), never a traceback, within a second of CPU. LLMSIM_FUZZ_EXAMPLES=5000 runs longer.
EXAMPLES = int(os.environ.get("LLMSIM_FUZZ_EXAMPLES", "40"))
CPU_LIMIT_S = 1.0
TIMES: list[tuple[float, float, str]] = []  # (CPU s, wall s, case): the slowest is printed after a long run


def _bomb(depth: int, width: int) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth)]
    return "{" + ", ".join(line.replace(": ", ": ", 1) for line in lines) + f", v: *a{depth - 1}}}"


# values as YAML flow text: numbers huge and tiny, long strings, unknown tags, nesting, aliases
hostile = st.one_of(
    st.sampled_from(["1e308", "-1e308", "1e-320", "-0.0", ".inf", "-.inf", ".nan", "0", "-1", "1_000", "0x7fffffffffffffff",
                     "9223372036854775808", "1" * 400, "!!int 1e3", "!!float 1e400", "!!python/object:os.system x",
                     "!!python/name:os.system", "!unknown 3", "!!binary aGVsbG8=", "!!set {a, b}", "2001-12-14",
                     "!!timestamp 2001-12-14", "~", "auto", "max", "''", "{<<: {tp: 2}}", "[]", "{}", "*undefined",
                     "9**9**9", "llama3-8b", "h100-sxm", "dgx-h100", "{base: h100-sxm, stacks: 0}",
                     "{base: h100-sxm, tdp_w: null}", "{base: h100-sxm, num_dies: .inf}"]),
    st.integers(-(10**30), 10**30).map(str),
    st.floats().map(lambda f: repr(f).replace("inf", ".inf").replace("nan", ".nan")),
    st.text(alphabet="xyz", min_size=1000, max_size=20000),
    st.integers(1, 400).map(lambda n: "[" * n + "1" + "]" * n),
    st.integers(1, 200).map(lambda n: "{a: " * n + "1" + "}" * n),
    st.tuples(st.integers(1, 9), st.integers(1, 14)).map(lambda t: _bomb(*t)),
)
SCENARIO_SLOTS = {"model": "llama3-8b", "acc": "h100-sxm", "devices": "8", "tp": "1", "gbs": "16", "mode": "training"}
SCENARIO_TEXT = ("model: {model}\nsystem: {{accelerator: {acc}, num_devices: {devices}, network: dgx-h100}}\n"
                 "parallel: {{tp: {tp}}}\nworkload: {{mode: {mode}, global_batch_size: {gbs}, batch_size: 1, "
                 "input_len: 16, output_len: 4}}\n")
SWEEP_SLOTS = {"tp": "[1, 2]", "pp": "[1, 2]", "range": "{from: 8, to: 32, mul: 2}", "constraint": "tp * pp <= 8",
               "objective": "tokens_per_s", "compare": "tokens_per_s", "keep": "feasible", "base_devices": "8"}
SWEEP_TEXT = ("base:\n  model: llama3-8b\n  system: {{accelerator: h100-sxm, num_devices: {base_devices}, "
              "network: dgx-h100}}\n  workload: {{global_batch_size: 32}}\ngrid:\n  parallel.tp: {tp}\n"
              "  parallel.pp: {pp}\n  workload.global_batch_size: {range}\nconstraints: [{constraint}]\n"
              "objectives: [{{maximize: {objective}}}]\ncompare: {compare}\nkeep: {keep}\n")


def _fill(template: str, slots: dict, data) -> str:
    values = dict(slots)
    for key in data.draw(st.lists(st.sampled_from(sorted(slots)), max_size=3, unique=True), label="slots"):
        values[key] = data.draw(hostile, label=key)
    return template.format(**values)


def _mangle(text: str, data) -> bytes:
    """The document's bytes, sometimes with non-UTF-8 bytes or an anchor/alias pair spliced in."""
    raw = text.encode()
    how = data.draw(st.sampled_from(["as is", "as is", "bytes", "anchor", "cut"]), label="mangle")
    if how == "bytes":
        at = data.draw(st.integers(0, len(raw)), label="at")
        return raw[:at] + data.draw(st.binary(min_size=1, max_size=8), label="junk") + raw[at:]
    if how == "anchor":
        return raw.replace(b"model: ", b"model: &m ", 1).replace(b"network: dgx-h100", b"network: *m", 1)
    if how == "cut":
        return raw[:data.draw(st.integers(0, len(raw)), label="cut at")]
    return raw


def _run_case(tmp_path, args: list[str], document: bytes, via_stdin: bool) -> None:
    from conftest import run_main

    path = tmp_path / "doc.yaml"
    path.write_bytes(document)
    argv = [a if a != "DOC" else ("-" if via_stdin else str(path)) for a in args]
    t0, w0 = time.process_time(), time.perf_counter()
    code, _, err = run_main(*argv, stdin=document if via_stdin else None)
    spent = time.process_time() - t0
    TIMES.append((spent, time.perf_counter() - w0, f"{argv} {document[:200]!r}"))
    assert code in (0, 2), err
    assert "Traceback" not in err, err
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("llmsim: error: ")]
        assert len(errors) == 1 and err.endswith(errors[0] + "\n"), err
    assert spent < CPU_LIMIT_S, f"{spent:.2f} s of CPU for {argv}"


@pytest.fixture(scope="module", autouse=True)
def _warm_and_report():
    from conftest import run_main

    run_main("estimate", "--format", "csv")  # imports (pandas, the engine) are not a case's time
    run_main("sweep", str(Path(__file__).parent.parent / "sweeps" / "gpt3-across-nodes.yaml"), "--jobs", "1")
    yield
    if TIMES and EXAMPLES > 100:
        spent, _, case = max(TIMES)
        wall = max(t[1] for t in TIMES)
        over = sum(t[1] > CPU_LIMIT_S for t in TIMES)
        sys.__stderr__.write(f"\nfuzz: {len(TIMES)} cases, slowest {spent:.3f} s CPU ({case[:300]}); slowest "
                             f"{wall:.3f} s wall; {over} over {CPU_LIMIT_S} s wall\n")


# no explain phase: it traces every line, which makes the replayed cases many times slower than a user's run
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None,
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])


@FUZZ
@given(data=st.data(), command=st.sampled_from(["check", "estimate", "estimate-set"]), via_stdin=st.booleans())
def test_hostile_scenarios_through_the_cli(tmp_path, data, command, via_stdin):
    document = _mangle(_fill(SCENARIO_TEXT, SCENARIO_SLOTS, data), data)
    if command == "check":
        args = ["check", "DOC"]
    elif command == "estimate":
        args = ["estimate", "DOC", "--format", "csv"]
    else:
        key = data.draw(st.sampled_from(["parallel.tp", "model", "cost.pue", "workload", "system.accelerator"]))
        args = ["estimate", "DOC", "--format", "json", "--set", f"{key}={data.draw(hostile)}"]
    _run_case(tmp_path, args, document, via_stdin)


@FUZZ
@given(data=st.data(), via_stdin=st.booleans())
def test_hostile_sweeps_through_the_cli(tmp_path, data, via_stdin):
    document = _mangle(_fill(SWEEP_TEXT, SWEEP_SLOTS, data), data)
    _run_case(tmp_path, ["sweep", "DOC", "--jobs", "1", "--quiet"], document, via_stdin)
