"""The model: pure functions over frozen values (``types.py``) that take numbers or numpy columns and
return the same, so one code path serves one estimate and a million-point sweep. Operators and roofline
(``compute``), memory, parameters, the 5D split, tensor-parallel overlap, compute beside collectives
(``overlap``), training, stragglers and goodput (``reliability``), static-batch inference, continuous-
batching serving (``serving``), windowed attention (``window``), the per-operator table; ``network/`` (placement of groups on tiers, collective algorithms and
the tuner that picks them) and ``cost/`` (silicon, system cost). Imports nothing from llmsim outside
``llmsim.engine``; raises ``errors.DesignError`` for a point it cannot evaluate.
"""
