"""Roofline cost: the FP8 queries and weights, the pages each request uses, the top-k ids."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fib_core.dataset.roofline import BYTES, Cost

PAGE = 64
TOPK = 2048
HEADS, DIM = 64, 128


def cost(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    """Pages read once (values and scales); one dot product per (token, head)."""
    batch, max_pages = axes["batch_size"], axes["max_num_pages"]
    if inputs is not None and inputs.get("seq_lens") is not None:
        lens = [int(v) for v in inputs["seq_lens"].tolist()]
        pages = sum(-(-length // PAGE) for length in lens)
        tokens = sum(lens)
    else:  # lengths unknown: tables half full on average
        pages = batch * (max_pages + 1) / 2
        tokens = pages * PAGE
    fp8, f32, i32 = BYTES["float8_e4m3fn"], BYTES["float32"], BYTES["int32"]
    read = (
        batch * HEADS * DIM * fp8
        + batch * HEADS * f32
        + batch * i32
        + batch * max_pages * i32
        + pages * PAGE * (DIM + 4)
    )
    written = batch * TOPK * i32
    flops = tokens * HEADS * 2 * DIM  # the relu/weight/sum epilogue is noise next to this
    return Cost(int(read + written), int(flops), "float8_e4m3fn")
