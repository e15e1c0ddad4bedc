"""The engine's one error: a design point it cannot evaluate (a split no framework runs, a batch of which
not one sequence fits). The CLI prints it on one line and exits with status 2; ``spec.errors.SpecError``
(bad input in a file) is a kind of it that also names the file and line."""

from __future__ import annotations


class DesignError(Exception):
    """A design point that cannot be evaluated; ``path`` is the scenario key at fault."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 path: str | None = None) -> None:
        self.message = " ".join(str(message).split())  # always one line
        self.file = file
        self.line = line
        self.path = path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        key = f"{self.path}: " if self.path else ""
        return f"{where}{key}{self.message}"
