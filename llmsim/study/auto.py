"""The values each ``auto`` training knob (``parallel.microbatch_size``, ``parallel.virtual_stages``) is
chosen from; ``study.modes.training.resolve_auto`` picks the fastest that fits."""

from __future__ import annotations


def interleavings(sc) -> list[int]:
    """Virtual stages a pipeline can run: 1, and every v > 1 that splits each device's layer slots (the
    embedding and loss counted when they take one) into v equal chunks (Megatron-LM: layers per virtual
    stage an integer) with no chunk left empty."""
    from llmsim.engine.split import extra_stages

    p, slots = sc.parallel, sc.model.layers + extra_stages(sc)
    if p.pp <= 1:
        return [1]
    per_device = -(-slots // p.pp)
    return [1] + [v for v in range(2, per_device + 1) if per_device % v == 0 and p.pp * v <= slots]


def microbatch_sizes(sc) -> list[int]:
    """Microbatch sizes a training step can run: every divisor of a data-parallel rank's share of the
    global batch (dp as given, or the devices over tp*pp*cp)."""
    p, w = sc.parallel, sc.workload
    dp = p.dp or max(sc.num_devices // max(p.tp * p.pp * p.cp, 1), 1)
    local = w.global_batch_size // dp if w.global_batch_size % dp == 0 else 1
    return [m for m in range(1, local + 1) if local % m == 0]


def auto_choices(sc) -> dict[str, list[int]]:
    """The values each ``auto`` knob of a training scenario is chosen from (empty when none is auto)."""
    p, out = sc.parallel, {}
    if p.microbatch_size == "auto":
        out["microbatch_size"] = microbatch_sizes(sc)
    if p.virtual_stages == "auto":
        out["virtual_stages"] = interleavings(sc)
    return out
