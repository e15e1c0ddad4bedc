"""Studies over the engine: the record of one design point with its input and cost columns
(``records.py``), sweep evaluation in chunks as numpy columns (``evaluate.py``), chunked fan-out with
joblib (``sweep.py``) or Dask (``dask_backend.py``), bounded-memory ranking (``stream.py``), Pareto
ranking (``pareto.py``), the split search (``search.py``) and nccl-tests-style collective rows
(``collective.py``). May import ``llmsim.engine`` and ``llmsim.spec``; never validation, output or cli.
"""
