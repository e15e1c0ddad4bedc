"""Shared pydantic base and field types for the scenario schema.

Every number is finite (no NaN or infinity) and bounded far above any real design, so that no product
of inputs overflows the engine's 64-bit integers or floats (the bounds refuse, they never round).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsim.engine.settings import MAX_COUNT, MAX_DEVICES, MAX_VALUE, PosInt  # noqa: F401 - declared once

NonNegInt = Annotated[int, Field(ge=0, le=MAX_COUNT)]
PosFloat = Annotated[float, Field(gt=0, le=MAX_VALUE)]
NonNegFloat = Annotated[float, Field(ge=0, le=MAX_VALUE)]


def _too_large(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return abs(value) > MAX_VALUE
    if isinstance(value, (list, tuple)):
        return any(_too_large(v) for v in value)
    if isinstance(value, dict):
        return any(_too_large(v) for v in value.values())
    return False


class Strict(BaseModel):
    """Unknown keys are errors; validated objects are immutable; numbers are finite and bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounded(self):
        for name, value in self.__dict__.items():
            if _too_large(value):
                raise ValueError(f"{name}: {value!r:.40} is out of range; numbers are at most {MAX_VALUE:g}")
        return self


Sources = dict[str, str]
