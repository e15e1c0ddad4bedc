"""Loading a scenario file: overrides, preset resolution, validation."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsim.spec.errors import SpecError
from llmsim.spec.presets import PresetRegistry
from llmsim.spec.scenario import ScenarioSpec
from llmsim.spec.validation import validate
from llmsim.spec.yamlio import Document, load_yaml, parse_yaml


@dataclass(frozen=True)
class Setting:
    """A typed override, from a command-line flag: the path it sets, the value as the flag gave it (never
    read again as YAML) and what the user wrote, for errors (``--tp 4``)."""

    label: str
    path: tuple[str, ...]
    value: Any


# an override: ``"parallel.tp=4"`` (--set: the value is YAML text, parsed here), or a typed ``Setting``
Override = str | Setting

# Where a scenario refers to a preset by name: (dotted path, preset kind).
PRESET_SLOTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("model",), "models"),
    (("system", "accelerator"), "accelerators"),
    (("system", "network"), "networks"),
    (("serving", "speculative", "draft_model"), "models"),
)
PRECISION_PATH = ("workload", "precision")  # a name or a mapping {activations, weights, experts, kv_cache}


def override_label(override: Override) -> tuple[str, str]:
    """(what the user wrote, the dotted path it sets) of an override."""
    if isinstance(override, Setting):
        return override.label, ".".join(override.path)
    return f"--set {override}", override.partition("=")[0].strip()


def parse_override(override: Override) -> tuple[tuple[str, ...], Any]:
    """``'parallel.tp=4'`` -> (("parallel", "tp"), 4), the value read as YAML; a ``Setting`` as it is."""
    if isinstance(override, Setting):
        return override.path, override.value
    label, text = f"--set {override}", override
    if "=" not in text:
        raise SpecError(f"--set {text!r}: expected dotted.path=value, e.g. parallel.tp=4")
    key, _, raw = text.partition("=")
    parts = tuple(p.strip() for p in key.strip().split("."))
    if not all(parts):
        raise SpecError(f"--set {text!r}: empty key in dotted path")
    try:
        value = parse_yaml(raw, label).data if raw.strip() else None
    except SpecError as err:
        raise SpecError(f"{label}: value is not valid YAML ({err.message})") from None
    return parts, value


def blame_override(err: SpecError, overrides: list[Override], source: str | None) -> SpecError:
    """``err`` naming the override that set the key at fault (``--set parallel.tp=nan: ...``) instead of
    the scenario file ``source``, which did not hold the value; ``err`` itself otherwise."""
    # a check across keys (ScenarioSpec._check) has no path of its own; its message opens with the key it
    # is about ("workload.precision fp4 is not supported by ...")
    path = err.path or (_LEADING_KEY.match(err.message or "") or [None, None])[1]
    if err.file not in (None, source) or not path:
        return err
    # a check across a section's keys names the keys it is about ("serving needs one of concurrency ... and
    # request_rate_per_s"): the last override of one of them
    named = set(re.findall(r"[a-z_]+", err.message or ""))
    for override in reversed(overrides):
        label, key = override_label(override)
        if key.startswith(path + ".") and key[len(path) + 1:] in named:
            return SpecError(err.message, file=label, path=err.path)
    for override in reversed(overrides):  # the last override of a key wins
        label, key = override_label(override)
        if path == key or path.startswith(key + ".") or key.startswith(path + "."):
            return SpecError(err.message, file=label, path=err.path)
    return err


_LEADING_KEY = re.compile(r"([a-z_]+(?:\.[a-z_]+)+)[ :]")


def apply_overrides(data: dict, overrides: list[tuple[tuple[str, ...], Any]], registry: PresetRegistry) -> None:
    """Set each dotted path in ``data``; a preset name on the way is expanded so fields can be overridden."""
    for parts, value in overrides:
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            slot_kind = dict(PRESET_SLOTS).get(parts[: i + 1])
            if isinstance(child, str) and slot_kind:
                child = registry.get(slot_kind, child).model_dump(exclude_none=True)
            elif isinstance(child, str) and parts[: i + 1] == PRECISION_PATH and child != "native":
                child = {"activations": child}  # one name is that precision throughout: its mapping's form
            if not isinstance(child, dict):
                if child is not None:
                    raise SpecError(f"{'.'.join(parts)}: '{'.'.join(parts[:i + 1])}' is {child!r}, not a mapping"
                                    + (" (the model's published precision: give the mapping instead)"
                                       if child == "native" else ""))
                child = {}
            node[part] = child
            node = child
        node[parts[-1]] = value


def resolve_presets(data: dict, doc: Document, registry: PresetRegistry) -> None:
    """Replace preset names by their validated specs (errors name the scenario's line)."""
    for path, kind in PRESET_SLOTS:
        parent = data
        for part in path[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        value = parent.get(path[-1])
        if kind == "accelerators" and isinstance(value, dict) and "base" in value:
            from llmsim.spec.derive import derive_accelerator

            try:
                parent[path[-1]] = derive_accelerator(value, registry, ".".join(path))
            except SpecError as err:
                raise SpecError(err.message, file=doc.source, line=doc.line_of(path)) from None
            continue
        if kind == "models" and (isinstance(value, dict) and "hf_config" in value
                                 or isinstance(value, str) and value.endswith(".json")):
            parent[path[-1]] = _hf_model(value, doc)
            continue
        if isinstance(value, str):
            try:
                parent[path[-1]] = registry.get(kind, value)
            except SpecError as err:
                if err.file is None:  # unknown name: point at the scenario's key
                    raise SpecError(err.message, file=doc.source, line=doc.line_of(path),
                                    path=".".join(path)) from None
                raise


def _hf_model(value, doc: Document):
    """``model: path/config.json`` (or ``--model path/config.json``) or ``model: {hf_config: path, ...}``:
    the model read from a local Hugging Face config; further keys of the mapping override its fields.
    A relative path is looked up from the working directory, then from the scenario's folder."""
    from llmsim.spec.hf_config import model_from_hf_config
    from llmsim.spec.model import ModelSpec

    extra = dict(value) if isinstance(value, dict) else {"hf_config": value}
    raw = extra.pop("hf_config")
    if not isinstance(raw, str) or not raw:
        raise SpecError("expected the path of a Hugging Face config.json", file=doc.source,
                        line=doc.line_of(("model", "hf_config")), path="model.hf_config")
    path = Path(raw).expanduser()
    if not path.is_absolute() and not path.exists() and doc.source:
        beside = Path(doc.source).parent / path
        path = beside if beside.exists() else path
    if not path.exists():
        raise SpecError(f"Hugging Face config not found: {raw}", file=doc.source, line=doc.line_of(("model",)),
                        path="model.hf_config")
    spec = model_from_hf_config(path)
    if not extra:
        return spec
    merged = {**spec.model_dump(exclude_none=True), **extra}
    return validate(ModelSpec, merged, doc, ("model",))


def load_scenario(path: str | Path | None, registry: PresetRegistry, overrides: list[Override] = (),
                  default: Path | None = None) -> ScenarioSpec:
    """Load, override and validate a scenario; ``path=None`` loads ``default``."""
    source = Path(path) if path is not None else default
    if source is None:
        raise SpecError("no scenario given")
    doc = load_yaml(source)
    if not isinstance(doc.data, dict):
        raise SpecError("a scenario must be a mapping with keys model, system, parallel, workload",
                        file=doc.source, line=1)
    data = copy.deepcopy(doc.data)
    try:
        apply_overrides(data, [parse_override(o) for o in overrides], registry)
        resolve_presets(data, doc, registry)
        return validate(ScenarioSpec, data, doc)
    except SpecError as err:
        raise blame_override(err, list(overrides), doc.source) from None
