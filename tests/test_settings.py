"""Each scenario setting is declared once (llmsim/engine/settings.py): the schema, the engine's inputs
and docs/settings.md come from it."""

import dataclasses
import re
from pathlib import Path

import pytest

from llmsim.engine.settings import CostRates, Parallel, Reliability
from llmsim.spec.declared import declared_sections, markdown
from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.study.records import load

ROOT = Path(__file__).resolve().parent.parent


def test_docs_settings_md_is_generated_from_the_declarations():
    # regenerate with: llmsim settings --format markdown > docs/settings.md
    assert (ROOT / "docs" / "settings.md").read_text(encoding="utf-8") == markdown()


def test_a_scenario_without_the_section_gets_the_declared_defaults():
    sc = load(None, PresetRegistry(), [])
    # the bundled default scenario sets these; the serving engine's defaults fill the serving settings
    # declared None (spec/engines.py)
    from llmsim.spec.engines import scheduler_defaults

    given = {"parallel.tp", "parallel.pp", "workload.seq_len", "workload.global_batch_size",
             *(f"serving.{k}" for k in scheduler_defaults("generic", "h100-sxm", 80e9))}
    for key, section in declared_sections():
        got = getattr(sc, key)
        for f in dataclasses.fields(section):
            if f"{key}.{f.name}" in given:
                continue
            assert getattr(got, f.name) == f.default, f"{key}.{f.name}"


@pytest.mark.parametrize("override, allowed", [
    ("parallel.zero_stage=4", "less than or equal to 3"),
    ("parallel.moe_gemm_kernel=sm90", "'native' or 'sm80'"),
    ("cost.pue=0.9", "greater than or equal to 1"),
    ("reliability.device_speed_cv=0.6", "less than or equal to 0.5"),
    ("parallel.order=[tp, cp, ep, dp, dp]", "exactly once"),
])
def test_the_declared_bounds_and_choices_are_enforced(override, allowed):
    with pytest.raises(SpecError, match=re.escape(allowed)):
        load(None, PresetRegistry(), [override])


def test_every_number_a_user_gets_by_default_has_a_source():
    # the rule of the project (a number without a source is a defect): cost and reliability defaults
    for section in (CostRates, Reliability):
        for f in dataclasses.fields(section):
            if isinstance(f.default, (int, float)) and not isinstance(f.default, bool):
                assert f.metadata["source"], f"{section.__name__}.{f.name} has no source"


def test_a_setting_is_named_in_its_declaration_and_where_it_is_used():
    # pipeline_embedding_stage (and the other settings no other part of llmsim has a use for) appear in
    # engine/settings.py and in the one module that reads them: nowhere in spec/, study/ or cli/
    names = {p: p.read_text(encoding="utf-8") for p in (ROOT / "llmsim").rglob("*.py")}
    for setting in ("pipeline_embedding_stage", "pipeline_loss_stage", "moe_comm_overlap", "restart_s"):
        modules = sorted(str(p.relative_to(ROOT)) for p, text in names.items() if re.search(rf"\b{setting}\b", text))
        assert len(modules) <= 2 and "llmsim/engine/settings.py" in modules, (setting, modules)
    assert {f.name for f in dataclasses.fields(Parallel)} >= {"pipeline_embedding_stage", "moe_gemm_kernel"}


def test_every_declared_flag_is_an_option_of_estimate_with_its_declared_help():
    import inspect

    from llmsim.cli.estimate import estimate

    params = inspect.signature(estimate).parameters
    for key, section in declared_sections():
        for f in dataclasses.fields(section):
            option = f.metadata.get("flag")
            if option:
                info = params[option.removeprefix("--").replace("-", "_")].default
                assert info.param_decls == (option,) and info.help == f.metadata["help"] + ".", f"{key}.{f.name}"


@pytest.mark.parametrize("flag, value, text", [
    ("request_rate", 2.5, "workload.request_rate_per_s=2.5"),
    ("kv_precision", "fp8", "workload.kv_precision=fp8"),
    ("concurrency", 12, "workload.concurrency=12"),
    ("zero_stage", 3, "parallel.zero_stage=3"),
])
def test_a_flag_sets_the_same_scenario_as_set(flag, value, text):
    from llmsim.study.records import overrides_from_flags

    serving = ["workload.mode=serving", "workload.input_len=1000", "workload.output_len=100"]
    serving += [] if flag in ("concurrency", "request_rate") else ["workload.concurrency=4"]
    by_flag = load(None, PresetRegistry(), serving + overrides_from_flags({flag: value}, []))
    by_set = load(None, PresetRegistry(), [*serving, text])
    assert by_flag == by_set


def test_a_record_choice_is_fixed_by_the_records_and_left_at_its_default_for_the_user(registry):
    # validate scores each run twice: with the modelling choices its converter fixed from the record
    # (record_choice settings) and with a user's defaults. The Megatron-LM training converter fixes
    # dropout 0.1 and tp_comm_overlap/attention_kernel from the framework (validation/training.py): the
    # second scenario must carry the declared defaults there (dropout 0.0, tp_comm_overlap false, auto)
    from llmsim.validation.runs import TRAINING, cases

    done, _ = cases(registry, (TRAINING,))
    fixed = [c for c in done if c.choices]
    assert fixed, "no training record fixes a modelling choice"
    seen = set()
    for case in fixed:
        for path in case.choices:
            section, key = path.split(".")
            got = getattr(getattr(case.default_scenario, section), key)
            default = {"model.dropout": 0.0}.get(path, next(
                (f.default for f in dataclasses.fields(Parallel) if f.name == key), None))
            assert got == default, (case.rec["id"], path, got)
            seen.add(path)
    assert {"model.dropout", "parallel.tp_comm_overlap", "parallel.attention_kernel"} <= seen
