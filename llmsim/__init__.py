"""llmsim: analytical performance-and-cost modelling of LLM training and inference systems."""

__version__ = "0.2.0"
