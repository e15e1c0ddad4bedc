"""Sliding-window and chunked attention: the share of the (query, key) pairs, and the keys per query,
that windowed layers leave of full causal attention, averaged over the model's layers.

A sliding window of W tokens (Beltagy et al. 2020, Longformer, arXiv 2004.05150; Mistral 7B, arXiv
2310.06825 sec. 2) gives query i the keys max(0, i - W)..i: over a sequence of s >= W tokens that is
W*s - W^2/2 pairs against full causal attention's s^2/2 (the engine's causal count). Chunked attention
(Llama 4's attention_chunk_size C) restricts each query to its own block of C tokens: (s/C) * C^2/2 =
s*C/2 pairs. FlashAttention skips the tiles outside the band (FlashAttention-2 ``window_size``), so
the FLOPs fall with the pairs; the cache keeps the last W tokens (sliding) or the current chunk (at
most C tokens) of a windowed layer. A model without a window gets factor 1 and its own context.
"""

from __future__ import annotations

import numpy as np

from llmsim.engine.types import Model


def pair_fraction(m: Model, s):
    """Causal (query, key) pairs of a sequence of ``s`` tokens over those of full causal attention,
    averaged over the layers (1.0 for layers without a window)."""
    w = m.attention_window
    s = np.asarray(s, dtype=float)
    win = float(w.tokens)
    if w.kind == "chunked":
        local = np.where(s > win, win / np.maximum(s, 1.0), 1.0)
    else:
        local = np.where(s > win, (2 * win * s - win * win) / np.maximum(s * s, 1.0), 1.0)
    out = (m.layers - w.layers + w.layers * local) / m.layers
    return out if out.ndim else float(out)


def key_span(m: Model, ctx):
    """Keys one query attends (and cached tokens kept) per layer with ``ctx`` tokens of context,
    averaged over the layers: ``ctx`` for full layers, at most the window for windowed ones."""
    w = m.attention_window
    local = np.minimum(ctx, w.tokens)
    return (ctx * (m.layers - w.layers) + local * w.layers) / m.layers
