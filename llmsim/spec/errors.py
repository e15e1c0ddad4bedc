"""The one error type users see: a clear, single-line message naming file, line and key."""

from __future__ import annotations


class SpecError(Exception):
    """Bad user input. The CLI prints ``str(err)`` on one line and exits with status 2."""

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
