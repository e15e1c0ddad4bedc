"""Predictions held against published measured runs: converting each record into a scenario
(``training.py``, ``inference.py``), one loop that runs both kinds and the error summaries (``runs.py``),
and the report with parity plots (``report.py``). May import ``llmsim.engine``, ``llmsim.spec`` and
``llmsim.study``; never output or cli.
"""
