"""Scenario and preset schema, YAML loading, and conversion to the engine's frozen values."""
