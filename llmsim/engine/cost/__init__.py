"""Cost: the chiplet silicon cost model (dies per wafer, yield, HBM, interposer, assembly, test, NRE;
``silicon.py``) and the system's capex, power, cost per hour and per token (``system.py``). The technology
tables these read come from presets through ``spec.cost``. Part of the engine: imports only
``llmsim.engine``.
"""
