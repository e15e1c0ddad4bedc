"""The one error type users see: a clear, single-line message naming file, line and key."""

from __future__ import annotations

from llmsim.engine.errors import DesignError


class SpecError(DesignError):
    """Bad user input. The CLI prints ``str(err)`` on one line and exits with status 2."""
