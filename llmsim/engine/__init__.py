"""The performance and cost model: pure functions over plain frozen values or numpy arrays."""
