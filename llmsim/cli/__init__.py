"""The command-line interface: the typer app (``app.py``) and one module per command group (estimate and
check, design: sweep/search/cost, collective, plot, validate, presets), plus the options they share
(``common.py``). Typer only: parse the flags, call ``study``, ``validation`` or the engine, print through
``output``. No modelling here. May import every other package; nothing imports it.
"""

from llmsim.cli.app import app, main

__all__ = ["app", "main"]
