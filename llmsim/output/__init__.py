"""What users read: rich tables (``tables.py``), CSV/JSON/Parquet writers with atomic files
(``writers.py``), the streamed sweep writer (``sweep_writer.py``), preset listings (``presets_table.py``)
and matplotlib figures (``plot.py``). Used by the CLI only; may import ``engine``, ``spec`` and ``study``.
"""
