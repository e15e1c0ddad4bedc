"""Turning pydantic validation errors into one-line SpecErrors that name file, line and key."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from llmsim.spec.errors import SpecError
from llmsim.spec.yamlio import Document

UNION_TAGS = ("tokens", "spread")  # discriminated unions' branch names (scenario.Length): not keys


def validate(cls: type[BaseModel], data: Any, doc: Document, prefix: tuple = ()) -> BaseModel:
    """Validate ``data`` (found at ``prefix`` inside ``doc``) as ``cls``, or raise a SpecError."""
    if not isinstance(data, dict):
        raise SpecError(f"expected a mapping of keys, got {_kind(data)}", file=doc.source,
                        line=doc.line_of(prefix), path=".".join(map(str, prefix)) or None)
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise to_spec_error(err, cls, doc, prefix) from None
    except (RecursionError, OverflowError) as err:
        raise SpecError(f"invalid value: {type(err).__name__}", file=doc.source) from None


def to_spec_error(err: ValidationError, cls: type[BaseModel], doc: Document, prefix: tuple = ()) -> SpecError:
    errors = [{**e, "loc": tuple(p for p in e["loc"] if p not in UNION_TAGS)} for e in err.errors(include_url=False)]
    # a mapping given where a name or a mapping is allowed (workload.precision): the mapping's own complaint,
    # which names its key (a model branch's tag, then the key), not "should be 'bf16' or ..."
    inner = [{**e, "loc": e["loc"][:i] + e["loc"][i + 1:]} for e in errors
             for i in [_model_branch(e["loc"])] if i is not None and len(e["loc"]) > i + 1]
    errors = inner or errors
    first = errors[0]
    branch = _union_branch(first["loc"])
    if branch is not None:  # a value of a union (a number or "auto"): every alternative's complaint, once
        base = tuple(first["loc"])[:branch]
        alts = [e for e in errors if tuple(e["loc"])[:branch] == base and len(e["loc"]) == branch + 1]
        msg = " or ".join(dict.fromkeys(re.sub(r"should be a valid dictionary or instance of \w+", "should be a mapping",
                                               e["msg"].removeprefix("Input ")) for e in alts))
        loc = prefix + base
        return SpecError(f"should be {msg.removeprefix('should be ').replace(' or should be ', ' or ')} "
                         f"(got {_short(first.get('input'))})", file=doc.source, line=doc.line_of(loc),
                         path=".".join(str(x) for x in loc))
    loc = prefix + tuple(first["loc"])
    path = ".".join(str(p) for p in loc) or None
    line = doc.line_of(loc)
    kind = first["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(cls, tuple(first["loc"])[:-1])
        msg = f"unknown key '{loc[-1]}'" + (f"; allowed keys: {', '.join(allowed)}" if allowed else "")
    elif kind == "missing":
        msg = "required key is missing"
    elif kind == "value_error":
        msg = str(first.get("ctx", {}).get("error", first["msg"]))
    else:
        msg = f"{first['msg']} (got {_short(first.get('input'))})"
    return SpecError(msg, file=doc.source, line=line, path=path)


def _model_branch(loc) -> int | None:
    """Index of a union branch that is a model (pydantic tags it with the class, e.g.
    "function-after[_check(), PrecisionSpec]"), None when there is none."""
    for i, part in enumerate(loc):
        if isinstance(part, str) and part.endswith(("Spec]]", "Spec]")) and "[" in part:
            return i
    return None


def _union_branch(loc) -> int | None:
    """Index of the union-branch tag pydantic puts in an error's location ("constrained-int",
    "literal['auto']"), None when there is none."""
    for i, part in enumerate(loc):
        if isinstance(part, str) and (part.startswith(("constrained-", "literal[")) or part in ("int", "str")):
            return i
    return None


def _allowed_keys(cls: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model found by walking ``loc`` from ``cls``."""
    current: Any = cls
    for part in loc:
        if isinstance(part, int):
            continue
        model = _model_in(current)
        if model is None or part not in model.model_fields:
            return []
        current = model.model_fields[part].annotation
    model = _model_in(current)
    return list(model.model_fields) if model else []


def key_error(cls: type[BaseModel], parts: tuple[str, ...]) -> str | None:
    """Why the dotted path ``parts`` names no key of ``cls`` (None when it does; free-form mappings such
    as ``sources`` take any key)."""
    current: Any = cls
    for i, part in enumerate(parts):
        model = _model_in(current)
        if model is None:
            if typing.get_origin(current) is dict:
                return None
            return f"'{'.'.join(parts[:i])}' is a value, it has no key {part!r}"
        if part not in model.model_fields:
            where = f"under {'.'.join(parts[:i])}" if i else "at the top"
            return f"unknown key {'.'.join(parts)!r}; allowed {where}: {', '.join(model.model_fields)}"
        current = model.model_fields[part].annotation
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
