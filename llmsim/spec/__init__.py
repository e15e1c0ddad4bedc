"""Input resolution: the scenario and preset schemas (pydantic), YAML loading with file/line/key errors,
preset lookup, ``--set`` overrides, derived accelerators (``derive.py``), the technology tables and the
accelerator cost they give (``cost.py``), the sweep spec (``sweep.py``) and the safe expression parser
for its constraints (``expr.py``); ``convert.py`` turns a checked spec into the engine's frozen values.
May import ``llmsim.engine`` (its types, errors and cost model); never study, validation, output or cli.
"""
