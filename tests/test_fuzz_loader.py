"""Random YAML documents never produce a traceback: only a SpecError or a valid scenario."""

import yaml
from hypothesis import HealthCheck, given, settings
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
