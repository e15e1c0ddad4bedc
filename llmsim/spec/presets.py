"""Finding and loading presets: bundled ones, then user folders (a later folder wins)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from pydantic import BaseModel

from llmsim.spec.errors import SpecError
from llmsim.spec.hardware import AcceleratorSpec, NetworkSpec
from llmsim.spec.model import ModelSpec
from llmsim.spec.validation import validate
from llmsim.spec.yamlio import load_yaml

KINDS: dict[str, type[BaseModel]] = {
    "accelerators": AcceleratorSpec,
    "models": ModelSpec,
    "networks": NetworkSpec,
}
ENV_VAR = "LLMSIM_PRESETS"


def bundled_dir() -> Path:
    """Presets inside the installed wheel, or the repository's top-level ``presets/`` in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_presets", here.parent / "presets"):
        if candidate.is_dir():
            return candidate
    raise SpecError("bundled presets not found: the llmsim installation is incomplete")


def user_dirs(cli_dirs: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """User preset folders: ``LLMSIM_PRESETS`` (path list) first, then ``--presets`` flags."""
    env = [p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    out = []
    for origin, raw in [(ENV_VAR, p) for p in env] + [("--presets", p) for p in cli_dirs]:
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise SpecError(f"{origin}: presets directory not found: {raw}")
        out.append(path)
    return out


class PresetRegistry:
    """Index of preset files by kind and name; validated presets are cached."""

    def __init__(self, extra_dirs: list[str] | tuple[str, ...] = ()) -> None:
        self.dirs = [bundled_dir(), *user_dirs(extra_dirs)]
        self._index: dict[str, dict[str, Path]] = {kind: {} for kind in KINDS}
        for root in self.dirs:
            for kind in KINDS:
                for path in sorted((root / kind).glob("*.yaml")):
                    self._index[kind][path.stem] = path  # later folders win
        self._cache: dict[tuple[str, str], BaseModel] = {}

    def names(self, kind: str) -> list[str]:
        return sorted(self._index[kind])

    def find(self, name: str) -> tuple[str, Path]:
        """Kind and file of a preset name, searching every kind."""
        for kind, entries in self._index.items():
            if name in entries:
                return kind, entries[name]
        every = [n for entries in self._index.values() for n in entries]
        raise SpecError(f"unknown preset '{name}'{_suggest(name, every)}")

    def path(self, kind: str, name: str) -> Path:
        try:
            return self._index[kind][name]
        except KeyError:
            singular = kind[:-1]
            raise SpecError(f"unknown {singular} preset '{name}'{_suggest(name, self.names(kind))}; "
                            f"see 'llmsim presets list --kind {kind}'") from None

    def get(self, kind: str, name: str) -> BaseModel:
        key = (kind, name)
        if key not in self._cache:
            path = self.path(kind, name)
            doc = load_yaml(path)
            data = doc.data
            if isinstance(data, dict):
                data.setdefault("name", name)
                if data["name"] != name:
                    raise SpecError(f"name '{data['name']}' must equal the file name '{name}'",
                                    file=str(path), line=doc.line_of(("name",)), path="name")
            self._cache[key] = validate(KINDS[kind], data, doc)
        return self._cache[key]


def _suggest(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.5)
    return f" (did you mean {', '.join(close)}?)" if close else ""
