"""Bad input: one clear line naming file, line, key and what is allowed; exit status 2."""

import textwrap

import pytest
from conftest import DATA, run_cli

from llmsim.spec.errors import SpecError
from llmsim.spec.load import load_scenario


def _write(tmp_path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _error(tmp_path, registry, text: str, overrides=()) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_scenario(_write(tmp_path, text), registry, list(overrides))
    return info.value


BASE = """\
model: llama3-8b
system:
  accelerator: h100-sxm
  num_devices: 64
  network: dgx-h100
workload:
  global_batch_size: 128
"""


def test_valid_scenario_loads(registry):
    spec = load_scenario(DATA / "scenario_ok.yaml", registry)
    assert spec.model.name == "llama3-8b"
    assert spec.parallel.tp == 8 and spec.parallel.dp is None
    assert spec.system.accelerator.hbm_capacity_gb == 80


def test_yaml_syntax_error_names_file_and_line(tmp_path, registry):
    err = _error(tmp_path, registry, "model: llama3-8b\nsystem:\n  accelerator: [h100\n  num: 3\n")
    assert err.file.endswith("s.yaml") and err.line in (3, 4, 5)
    assert "YAML syntax error" in str(err)


def test_unknown_key_names_path_line_and_allowed(tmp_path, registry):
    err = _error(tmp_path, registry, BASE + "parallel:\n  tp: 2\n  tpp: 4\n")
    assert err.path == "parallel.tpp"
    assert err.line == 10  # line of 'tpp:' (BASE has 7 lines, then 'parallel:', 'tp: 2')
    assert "unknown key 'tpp'" in err.message and "tp, pp, dp" in err.message


def test_unknown_key_inside_inline_model(tmp_path, registry):
    text = BASE.replace("model: llama3-8b", "model:\n  name: m\n  layers: 2\n  hidden: 64\n"
                        "  ffn_hidden: 256\n  heads: 4\n  vocab: 100\n  colour: red")
    err = _error(tmp_path, registry, text)
    assert err.path == "model.colour" and err.line == 8


def test_negative_layers(tmp_path, registry):
    text = BASE.replace("model: llama3-8b", "model:\n  name: m\n  layers: -2\n  hidden: 64\n"
                        "  ffn_hidden: 256\n  heads: 4\n  vocab: 100")
    err = _error(tmp_path, registry, text)
    assert err.path == "model.layers" and err.line == 3
    assert "greater than 0" in err.message and "-2" in err.message


def test_heads_must_divide_hidden_without_head_dim(tmp_path, registry):
    text = BASE.replace("model: llama3-8b", "model:\n  name: m\n  layers: 2\n  hidden: 100\n"
                        "  ffn_hidden: 256\n  heads: 3\n  vocab: 100")
    err = _error(tmp_path, registry, text)
    assert err.path == "model" and "heads (3) must divide hidden (100)" in err.message


def test_top_k_above_experts(tmp_path, registry):
    text = BASE.replace("model: llama3-8b", "model:\n  name: m\n  layers: 2\n  hidden: 64\n"
                        "  ffn_hidden: 256\n  heads: 4\n  vocab: 100\n"
                        "  moe: {experts: 4, top_k: 8, expert_ffn_hidden: 64}")
    err = _error(tmp_path, registry, text)
    assert err.path == "model.moe" and "top_k (8) must be <= experts (4)" in err.message


def test_wrong_literal_lists_allowed_values(tmp_path, registry):
    err = _error(tmp_path, registry, BASE + "parallel:\n  recompute: some\n")
    assert err.path == "parallel.recompute"
    assert "'none', 'selective' or 'full'" in err.message and "'some'" in err.message
    err = _error(tmp_path, registry, BASE + "parallel:\n  recompute: selective:moe_act+attn\n")
    assert err.path == "parallel.recompute" and "mla_up_proj" in err.message and "'selective:moe_act+attn'" in err.message
    # an unquoted `--set parallel.recompute=selective:` reaches the schema as the mapping {selective: null}
    err = _error(tmp_path, registry, BASE + "parallel:\n  recompute: {selective: null}\n")
    assert err.path == "parallel.recompute" and "quote" in err.message and "mla_up_proj" in err.message


def test_recompute_flag_takes_the_modules_and_names_them_when_wrong():
    ok = run_cli("estimate", "--model", "mixtral-8x7b", "--devices", "64", "--tp", "2", "--pp", "1",
                 "--set", "parallel.ep=8", "--recompute", "selective:moe_act+layernorm",
                 "--format", "json")
    assert ok.returncode == 0 and '"recompute": "selective:layernorm+moe_act"' in ok.stdout  # canonical order
    bad = run_cli("estimate", "--recompute", "selective:attn")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--recompute selective:attn" in bad.stderr and "mla_up_proj" in bad.stderr


def test_flag_values_reach_the_spec_as_typed_not_as_yaml():
    from llmsim.study.records import overrides_from_flags

    # a flag value is not YAML: it reaches the spec typed, as (path, value), '#' no comment, braces no mapping
    got = [(o.path, o.value) for o in overrides_from_flags({"recompute": "full # x", "model": "{a: 1}",
                                                           "microbatch_size": "auto", "pp": 4}, [])]
    assert got == [(("parallel", "recompute"), "full # x"), (("model",), "{a: 1}"),
                   (("parallel", "microbatch_size"), "auto"), (("parallel", "pp"), 4)]
    # blanks around a value go; null is the field's default; text that YAML would read as a date, a
    # boolean or a hex number stays text (a one-line error naming the flag, not a traceback); --set is YAML
    got = [o.value for o in overrides_from_flags({"precision": " bf16 ", "kv_precision": "null", "model": "2024-13-01",
                                                  "recompute": "yes", "batch_size": "0x10"}, ["parallel.tp=0x10"])[:5]]
    assert got == ["bf16", None, "2024-13-01", "yes", "0x10"]
    assert overrides_from_flags({}, ["parallel.tp=0x10"]) == ["parallel.tp=0x10"]
    for flag, value in (("--model", "2024-13-01"), ("--recompute", "!!float x"), ("--model", "[" * 3000)):
        res = run_cli("estimate", flag, value)
        assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.count("\n") == 1
    bad = run_cli("estimate", "--recompute", "full # x")  # was read as `full` (YAML comment) until 2026-11-25
    assert bad.returncode == 2 and "'full # x'" in bad.stderr and "Traceback" not in bad.stderr


def test_grad_reduce_dtype_and_optimizer_states_list_allowed_values(tmp_path, registry):
    err = _error(tmp_path, registry, BASE + "parallel:\n  grad_reduce_dtype: fp16\n")
    assert err.path == "parallel.grad_reduce_dtype" and err.line == 9
    assert "'auto', 'fp32' or 'bf16'" in err.message and "'fp16'" in err.message
    err = _error(tmp_path, registry, BASE + "parallel:\n  optimizer_states: fp8\n")
    assert err.path == "parallel.optimizer_states"
    assert "'fp32', 'fp32-remainders' or 'bf16'" in err.message
    # bf16 gradients or Apex state layouts need bf16 parameters
    err = _error(tmp_path, registry, BASE + "parallel:\n  grad_reduce_dtype: bf16\n", ["workload.precision=fp16"])
    assert "parallel.grad_reduce_dtype bf16 needs bf16 parameters" in err.message and "allowed: auto, fp32" in err.message


def test_cli_bad_grad_reduce_dtype_is_one_line_exit_2():
    res = run_cli("estimate", "--set", "parallel.grad_reduce_dtype=fp16")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "parallel.grad_reduce_dtype: Input should be 'auto', 'fp32' or 'bf16' (got 'fp16')" in res.stderr


def test_unknown_preset_suggests_nearest(tmp_path, registry):
    err = _error(tmp_path, registry, BASE.replace("h100-sxm", "h100-sx"))
    assert err.path == "system.accelerator" and err.line == 3
    assert "unknown accelerator preset 'h100-sx'" in err.message and "h100-sxm" in err.message


def test_override_sets_preset_field(tmp_path, registry):
    spec = load_scenario(_write(tmp_path, BASE), registry, ["model.layers=4", "parallel.tp=2"])
    assert spec.model.layers == 4 and spec.model.hidden == 4096 and spec.parallel.tp == 2


def test_bad_override_is_clean_error(tmp_path, registry):
    with pytest.raises(SpecError, match="expected dotted.path=value"):
        load_scenario(_write(tmp_path, BASE), registry, ["parallel.tp"])


def test_too_many_devices_for_network(tmp_path, registry):
    err = _error(tmp_path, registry, BASE.replace("num_devices: 64", "num_devices: 100000000"))
    assert err.path == "system" and "exceeds the largest tier" in err.message


@pytest.mark.parametrize("args", [["presets", "show", "nosuch"], ["check", str(DATA / "nosuch.yaml")]])
def test_cli_errors_are_one_line_exit_2(args):
    res = run_cli(*args)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("llmsim: error:")
    assert "Traceback" not in res.stderr


def test_cli_unknown_key_one_line(tmp_path):
    res = run_cli("check", str(_write(tmp_path, BASE + "colour: red\n")))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "s.yaml:8: colour: unknown key 'colour'" in res.stderr


@pytest.mark.parametrize("args, message", [
    (["estimate", "--set", "parallel.virtual_stages=0"], "parallel.virtual_stages: should be greater than 0 or 'auto' (got 0)"),
    (["estimate", "--mode", "inference", "--set", "workload.batch_size=-1", "--input-len", "8", "--output-len", "8"],
     "workload.batch_size: should be greater than 0 or 'max' (got -1)"),
    (["calibrate", "-o", "/nonexistent-dir/x.json"], "-o /nonexistent-dir/x.json: directory /nonexistent-dir does not exist"),
])
def test_union_values_and_calibrate_output_are_one_line_errors(args, message):
    # a value that may be a number or a word names both alternatives, not pydantic's branch tags
    res = run_cli(*args)
    assert res.returncode == 2 and message in res.stderr and "constrained-int" not in res.stderr
    assert res.stderr.strip().count("\n") <= 1 and "Traceback" not in res.stderr


@pytest.mark.parametrize(("argv", "label"), [
    # a check across keys has no path of its own; its message opens with the key, which a flag set
    (["estimate", "--precision", "fp4", "--accelerator", "h100-sxm"], "--precision fp4: workload.precision fp4"),
    (["estimate", "--mode", "serving", "--model", "llama3-8b", "--devices", "1", "--tp", "1", "--pp", "1",
      "--input-len", "8", "--output-len", "8", "--set", "workload.concurrency=1", "--set",
      "workload.precision.experts=fp8"], "--set workload.precision.experts=fp8: workload.precision.experts"),
])
def test_a_check_across_keys_names_the_flag_not_the_bundled_scenario(argv, label):
    r = run_cli(*argv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and label in r.stderr, r.stderr
    assert "default.yaml" not in r.stderr
