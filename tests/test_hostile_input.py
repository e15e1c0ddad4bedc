"""Issue 22: no input hangs llmsim or makes it crash. Each input below once ended in a traceback, a hang or
a wrong result with exit 0; now each is one line on stderr and exit status 2 (or a correct result)."""

import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import run_main

ROOT = Path(__file__).resolve().parent.parent
SPLITS = ROOT / "sweeps" / "llama3-8b-splits.yaml"
BASE = {"model": "llama3-8b", "system": {"accelerator": "h100-sxm", "num_devices": 64, "network": "dgx-h100"},
        "workload": {"global_batch_size": 128}}
SCENARIO = "model: llama3-8b\nsystem: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}\n" \
           "workload: {global_batch_size: 16}\n"
BOMB = "".join(f"{a}: &{a} [{', '.join([f'*{p}' if p else 'x'] * 9)}]\n"
               for a, p in zip("abcdefg", ["", *"abcdef"], strict=True)) + "model: *g\n"


def _sweep(tmp_path, name="s.yaml", **spec) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"base": BASE, "grid": {"parallel.tp": [1, 2]}, **spec}))
    return str(path)


def _fails(result, *needles):
    """``result`` (``run_main``'s) is one line on stderr naming each of ``needles``, exit status 2."""
    code, _, err = result
    _one_line_error(code, err, *needles)


def _one_line_error(code, err, *needles):
    """Exit status 2 and one error line (after the command's notes, such as the sweep's size), no traceback."""
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("llmsim: error: ")]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n") and "Traceback" not in err, err
    for needle in needles:
        assert needle in errors[0], err


# 1. alias bombs
@pytest.mark.parametrize("command", ["check", "estimate", "sweep"])
def test_alias_bomb_is_refused_quickly_naming_file_and_line(tmp_path, command):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    t0 = time.process_time()
    code, _, err = run_main(command, str(path))
    assert time.process_time() - t0 < 5  # it used to run for minutes; the bound is far from flaky
    _one_line_error(code, err, f"{path}:6:", "more than 100,000 values")


def test_recursive_alias_and_deep_nesting_are_refused(tmp_path):
    (tmp_path / "r.yaml").write_text("a: &a [1, *a]\n")
    _fails(run_main("check", str(tmp_path / "r.yaml")), "recursive alias")
    (tmp_path / "n.yaml").write_text("model: " + "[" * 150 + "]" * 150 + "\n")
    _fails(run_main("check", str(tmp_path / "n.yaml")), "levels deep")


def test_override_value_alias_bomb_is_refused():
    value = "[" + ", ".join(["&a [x, x, x, x, x, x, x, x, x, x]"] + ["*a"] * 9) + "]"
    code, _, err = run_main("estimate", "--set", f"model={value}")
    _one_line_error(code, err, "--set model=")


# 2. worker counts
@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_bad_jobs_is_one_line(jobs):
    _fails(run_main("sweep", str(SPLITS), "--jobs", jobs), f"--jobs {jobs}")


def test_too_many_jobs_are_capped_at_the_cores_said_once():
    code, _, err = run_main("search", "--model", "llama3-8b", "--devices", "8", "--jobs", "100000",
                              "--format", "csv", "--top", "1")
    assert code == 0, err
    assert err.count("--jobs 100000 capped at") == 1


# 3. override errors name what the user wrote
def test_set_error_names_the_override_not_the_default_file():
    code, _, err = run_main("estimate", "--set", "parallel.tp=nan")
    _one_line_error(code, err, "--set parallel.tp=nan: parallel.tp:")
    assert "default.yaml" not in err


def test_flag_error_names_the_flag():
    _fails(run_main("estimate", "--tp", "3"), "--tp 3: parallel:")
    _fails(run_main("estimate", "--model", "nosuch"), "--model nosuch: model:")


def test_error_in_the_file_still_names_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("num_devices: 8", "num_devices: -8"))
    _fails(run_main("estimate", str(path), "--set", "parallel.tp=2"), f"{path}:2:")


# 4. stdin
def test_dash_reads_stdin_for_estimate_check_and_sweep():
    code, out, err = run_main("estimate", "-", "--format", "csv", stdin=SCENARIO.encode())
    assert code == 0 and out.startswith("model,") and len(out.splitlines()) == 2, err
    code, out, _ = run_main("check", "-", stdin=SCENARIO.encode())
    assert code == 0 and "llama3-8b" in out
    code, out, err = run_main("sweep", "-", "--jobs", "1", "--quiet", stdin=SPLITS.read_bytes())
    assert code == 0 and out.startswith("model,") and "design points" in err and "design points" not in out


def test_stdin_through_a_real_pipe():
    r = subprocess.run([sys.executable, "-m", "llmsim", "estimate", "-", "--format", "json"],
                       input=SCENARIO, capture_output=True, text=True, check=False)
    assert r.returncode == 0 and r.stdout.lstrip().startswith("{"), r.stderr


# 5. results are never silently wrong
def test_constraint_with_wrong_arity_is_an_error(tmp_path):
    _fails(run_main("sweep", _sweep(tmp_path, constraints=["abs(tp, pp) > 0"]), "--jobs", "1"),
                    "abs() takes one argument, got 2")
    _fails(run_main("sweep", _sweep(tmp_path, constraints=["min(tp) > 0"]), "--jobs", "1"),
                    "min() takes two or more arguments")


def test_constraints_only_filter_rows(tmp_path):
    grid = {"parallel.tp": [1, 2, 4], "parallel.pp": [1, 2]}
    plain = run_main("sweep", _sweep(tmp_path, "a.yaml", grid=grid), "--jobs", "1", "--quiet")[1]
    kept = run_main("sweep", _sweep(tmp_path, "b.yaml", grid=grid, constraints=[
        "abs(tp - pp) >= 0 and max(tp, pp, 1) >= 1 and min(abs(pp), tp) >= 1 and -tp < 0"]), "--jobs", "1", "--quiet")[1]
    assert kept == plain and len(plain.splitlines()) == 7


@pytest.mark.parametrize("text,needle", [
    ("workload: {mode: inference, batch_size: 1000000000000000, input_len: 2048, output_len: 256}",
     "workload.batch_size"),
    ("workload: {mode: inference, batch_size: 1000000000000, input_len: 2048, output_len: 256}",
     "overflow 64-bit integers"),
    ("workload: {global_batch_size: 16}\ncost: {electricity_usd_per_kwh: .inf}", "cost.electricity_usd_per_kwh"),
    ("workload: {global_batch_size: 16}\ncost: {pue: .nan}", "cost.pue"),
])
def test_non_finite_and_overflowing_inputs_are_refused(tmp_path, text, needle):
    path = tmp_path / "s.yaml"
    path.write_text("model: llama3-8b\nsystem: {accelerator: h100-sxm, num_devices: 8, network: dgx-h100}\n" + text)
    _fails(run_main("estimate", str(path), "--format", "csv"), needle)


def test_infinite_capacity_factor_is_refused():
    _fails(run_main("estimate", "--set", "model=mixtral-8x7b", "--set", "model.moe.capacity_factor=.inf"),
                    "--set model.moe.capacity_factor=.inf", "finite")


# 6. sweep specs checked before any work
@pytest.mark.parametrize("spec,needle", [
    ({"grid": {"parallel.tp": {"from": 1, "to": 1e9, "step": 1}}}, "1,000,000,000 values"),
    ({"grid": {"parallel.tp": {"from": 1, "to": float("inf"), "mul": 2}}}, "to must be a finite number"),
    ({"grid": {"system.num_devices": [10**12], "parallel.tp": "auto"}}, "num_devices 1,000,000,000,000"),
    ({"constraints": ["tp <= 9**9**9"]}, "too large a number"),
    ({"grid": {"parallel.tpp": [1]}}, "unknown key 'parallel.tpp'"),
    ({"objectives": [{"maximize": "tokens_per_sec"}]}, "objective column 'tokens_per_sec'"),
    ({"compare": "tokens_per_sec"}, "compare column 'tokens_per_sec'"),
])
def test_bad_sweep_specs_fail_before_any_point_is_evaluated(tmp_path, monkeypatch, spec, needle):
    from llmsim.study import stream

    def no_work(*a, **k):
        raise AssertionError("the sweep started evaluating")

    monkeypatch.setattr(stream, "evaluate", no_work)
    t0 = time.process_time()
    _fails(run_main("sweep", _sweep(tmp_path, **spec), "--jobs", "1"), needle)
    assert time.process_time() - t0 < 5


def test_all_infeasible_sweep_still_writes_the_csv_header(tmp_path):
    spec = _sweep(tmp_path, grid={"parallel.tp": [3]})
    code, out, err = run_main("sweep", spec, "--jobs", "1", "--quiet")
    assert code == 0 and out.startswith("model,accelerator,") and len(out.splitlines()) == 1, err
    code, _, err = run_main("sweep", spec, "--jobs", "1", "--quiet", "-o", str(tmp_path / "o.csv"))
    assert code == 0 and (tmp_path / "o.csv").read_text() == out


# 7. every other traceback the fuzz found
@pytest.mark.parametrize("spec,needle", [
    ({"grid": {1: [2]}}, "dotted scenario paths"),
    ({"grid": {"parallel.tp": {"from": "a", "to": 3, "step": 1}}}, "from must be a finite number"),
    ({"objectives": True}, "objectives is a list"),
    ({"constraints": float("inf")}, "constraints is a list"),
    ({"constraints": ["tp <= 'x'"]}, "cannot be evaluated"),
    ({"constraints": ["max"]}, "max is a function"),  # found by the long fuzz run: a KeyError
])
def test_sweep_spec_fuzz_findings(tmp_path, spec, needle):
    _fails(run_main("sweep", _sweep(tmp_path, **spec), "--jobs", "1"), needle)


def test_base_with_a_string_system_is_not_a_traceback(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"base": {"system": "h100"}, "grid": {"parallel.tp": [1]}, "keep": "all"}))
    code, out, err = run_main("sweep", str(path), "--jobs", "1", "--quiet")
    assert code == 0 and "Traceback" not in err and out.splitlines()[1].endswith("model: required key is missing")


@pytest.mark.parametrize("value", ["0", "-1"])
def test_collective_bad_stride(value):
    _fails(run_main("collective", "--stride", value), "--stride")


def test_dask_scheduler_that_is_not_an_address():
    pytest.importorskip("dask.distributed")
    _fails(run_main("sweep", str(SPLITS), "--backend", "dask", "--scheduler", "notaurl"), "--scheduler")


@pytest.mark.parametrize("field,value", [("stacks", "0"), ("die_area_mm2", "0"), ("num_dies", ".inf"),
                                         ("tdp_w", "null"), ("stacks", "100000000")])
def test_bad_derived_accelerator_fields(tmp_path, field, value):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("accelerator: h100-sxm", f"accelerator: {{base: h100-sxm, {field}: {value}}}"))
    _fails(run_main("estimate", str(path)), f"{path}:2:")


def test_full_disk_under_output_is_one_line(tmp_path):
    def small_files():  # a file may grow to 4 kB: writing more fails as on a full disk (EFBIG)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    out = tmp_path / "o.csv"
    r = subprocess.run([sys.executable, "-m", "llmsim", "sweep", str(SPLITS), "--jobs", "1", "--quiet", "-o",
                        str(out)], capture_output=True, text=True, preexec_fn=small_files, check=False)
    _one_line_error(r.returncode, r.stderr.split("\n", 1)[1] if r.stderr.startswith("llmsim sweep:") else r.stderr,
                    f"{out}: cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no part files, no temporary output


def test_unwritable_plot_and_report_paths(tmp_path):
    (tmp_path / "afile").write_text("")
    _fails(run_main("validate", "--report", str(tmp_path / "afile" / "report")), "cannot write")
    _fails(run_main("plot", "breakdown", "-o", "/proc/llmsim-test.png"), "cannot write")


# 8. signals and files
def test_sigterm_mid_sweep_leaves_no_files(tmp_path):
    spec = _sweep(tmp_path, grid={"parallel.tp": "auto", "parallel.pp": "auto",
                                  "parallel.microbatch_size": [1, 2, 4, 8],
                                  "workload.global_batch_size": {"from": 64, "to": 262144, "step": 64}})
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "llmsim", "sweep", spec, "--jobs", "2", "--quiet", "--yes",
                             "-o", str(out / "r.csv")], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".llmsim-sweep-") and any(p.iterdir()) for p in out.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, "the sweep ended before it could be stopped"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "llmsim: terminated" in err and "Traceback" not in err, err
    assert list(out.iterdir()) == []


def test_replacing_an_output_keeps_its_mode_and_follows_a_symlink(tmp_path):
    spec = _sweep(tmp_path)
    out = tmp_path / "o.csv"
    out.write_text("old")
    out.chmod(0o640)
    assert run_main("sweep", spec, "--jobs", "1", "--quiet", "-o", str(out))[0] == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and out.read_text().startswith("model,")
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "t.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert run_main("sweep", spec, "--jobs", "1", "--quiet", "-o", str(link))[0] == 0
    assert link.is_symlink() and target.read_text().startswith("model,")


def test_sweep_into_a_closed_pipe_exits_0_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "llmsim", "sweep", str(SPLITS), "--jobs", "1", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"model,")
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Error" not in err and "Traceback" not in err, err


def test_sweep_base_with_a_400_digit_device_count(tmp_path):
    # found by the long fuzz run: math.isfinite() of the integer raised OverflowError
    path = tmp_path / "s.yaml"
    path.write_text(f"base:\n  model: llama3-8b\n  system: {{accelerator: h100-sxm, num_devices: {'1' * 400}, "
                    "network: dgx-h100}\n  workload: {global_batch_size: 32}\ngrid:\n  parallel.tp: [1, 2]\n")
    code, out, err = run_main("sweep", str(path), "--jobs", "1", "--quiet")
    assert code == 0 and out.startswith("model,") and "Traceback" not in err, err


def test_flow_brackets_nested_far_past_any_stack_are_refused_in_one_line(tmp_path):
    # 200,000 nested flow lists: libyaml would recurse in C until the process crashes; the text goes to
    # PyYAML's parser instead, and the error is one line, exit 2
    f = tmp_path / "deep.yaml"
    f.write_text("model: " + "[" * 200_000 + "]" * 200_000 + "\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "llmsim", "estimate", str(f)], capture_output=True, text=True,
                       check=False, timeout=120)  # its own process: a crash shows as a signal here
    assert r.returncode == 2 and "deep" in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr)
