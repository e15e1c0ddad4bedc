"""One model per workload mode: ``training``, ``inference`` (a static batch) and ``serving`` (continuous
batching). Each says how one design point becomes a row (``point``), how a sweep's group of splits becomes
rows (``group``), what a search ranks by (``default_objective``), shows (``shown``) and tries
(``search_axes``); the columns each writes are declared in ``llmsim.schema``."""

from __future__ import annotations

from llmsim.study.modes.inference import Inference
from llmsim.study.modes.serving import Serving
from llmsim.study.modes.training import Training

MODES = {m.name: m for m in (Training(), Inference(), Serving())}


def of(sc):
    """The mode of scenario ``sc``."""
    return MODES[sc.workload.mode]
