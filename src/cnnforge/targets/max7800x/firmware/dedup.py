"""Layers that reuse an earlier layer's kernels or bias instead of storing their own copy.

The vendor tool stores identical kernels (same values and shape, weight width and input
processors) and identical bias values once, the later layer pointing at the first one's kernel
columns or bias entries (its default weight deduplication). cnnforge does the same where the
copy would be laid out the same way: kernels also need the same output processors and
convolution kind, bias the same kind (depthwise or not), the same first output processor
within its instance and the same streaming skip; depthwise bias the same processors. (The
vendor shares in those other cases too; its firmware then reads another layout than the
layer's, so cnnforge keeps a copy there.) Learned from the vendor tool's kdedup and
the vendor tool's backend (``kernel_ptrs``, ``bias_ptrs``).
"""

from __future__ import annotations

import numpy as np

from cnnforge.targets.max7800x.firmware.facts import LayerFacts


def _vendor_shape(w: np.ndarray) -> np.ndarray:
    """The weights as the vendor compares them: (out x in, kernel...) or, linear, (1, out, in)."""
    return w.reshape(-1, *w.shape[2:]) if w.ndim > 2 else w[None]


def kernel_duplicates(facts: list[LayerFacts]) -> dict[int, int]:
    """{layer index: the earlier layer whose kernel columns it uses}."""
    out: dict[int, int] = {}
    firsts: list[LayerFacts] = []
    for f in facts:
        if not f.has_weights or f.weights is None:
            continue
        w = _vendor_shape(np.asarray(f.weights))
        for g in firsts:
            assert g.weights is not None
            same = (g.weight_bits, g.in_map, g.out_map, g.groups, g.flatten, g.op) == (
                f.weight_bits, f.in_map, f.out_map, f.groups, f.flatten, f.op
            )  # fmt: skip
            v = _vendor_shape(np.asarray(g.weights))
            if same and v.shape == w.shape and np.array_equal(v, w):
                out[f.index] = g.index
                break
        else:
            firsts.append(f)
    return out


def bias_duplicates(facts: list[LayerFacts], skip: dict[int, int]) -> dict[int, int]:
    """{layer index: the earlier layer whose bias entries it uses}; ``skip``: per layer the
    entries a streaming first layer leaves empty (bias.py)."""
    out: dict[int, int] = {}
    firsts: list[LayerFacts] = []
    for f in facts:
        if f.bias is None or not f.has_weights:
            continue
        for g in firsts:
            assert g.bias is not None
            if _bias_key(g, skip) == _bias_key(f, skip) and np.array_equal(g.bias, f.bias):
                out[f.index] = g.index
                break
        else:
            firsts.append(f)
    return out


def _bias_key(f: LayerFacts, skip: dict[int, int]) -> tuple:
    """What must agree for two layers to read the same bias entries."""
    if f.groups > 1:
        return ("depthwise", f.in_map, f.out_map, np.shape(f.bias))
    first = (f.out_map & -f.out_map).bit_length() - 1
    return ("conv", first % 4, f.out_expand, skip.get(f.index, 0), np.shape(f.bias))
