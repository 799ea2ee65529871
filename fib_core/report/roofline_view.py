"""Roofline figures for result rows, from ``fib_core.dataset.roofline`` when it can tell.

The table's "% of roofline" column answers "how far is this kernel from what the GPU allows":
floor / measured, where the floor is the slower of moving the workload's bytes at peak
bandwidth and doing its flops at peak throughput. Only the dataset package knows a workload's
cost and a GPU's peaks; for a definition or GPU it does not know (or on CPU) the figures stay
unknown instead of guessed.
"""

from __future__ import annotations

from typing import Any

from fib_core.dataset import roofline
from fib_core.report.workload_result import Achieved

_LOOKUP_ERRORS = (KeyError, ValueError, TypeError, LookupError, AttributeError, ZeroDivisionError)


class RooflineView:
    """Cost and peak lookups for one definition on one GPU, failing soft to None."""

    def __init__(self, definition_name: str, gpu_name: str | None) -> None:
        self.definition_name = definition_name
        self.gpu_name = gpu_name
        self._peak = roofline.detect_gpu_peak(gpu_name) if gpu_name else None

    def figures(
        self, axes: dict[str, int], latency_ms: float, cost: dict[str, Any] | None = None
    ) -> tuple[float, float, Achieved | None] | None:
        """(floor_ms, roofline_fraction, achieved) for a workload, or None when unknown.

        ``cost`` is the engine's exact count from the workload's real inputs (the trace's
        ``performance.cost``: the MoE routing, the valid sparse indices); without it the
        definition's axis-only model is used, which can only estimate data-dependent work.
        """
        if self._peak is None or latency_ms <= 0:
            return None
        try:
            if isinstance(cost, dict):
                model = roofline.Cost(int(cost["bytes"]), int(cost["flops"]), str(cost["dtype"]))
            else:
                model = roofline.workload_cost(self.definition_name, axes)
            floor = roofline.roofline_floor_ms(model, self._peak)
        except _LOOKUP_ERRORS:
            return None
        if floor.ms <= 0:
            return None
        seconds = latency_ms / 1e3
        if floor.bound == "memory":
            achieved = Achieved(float(model.bytes) / seconds / 1e9, "GB/s")
        else:
            achieved = Achieved(float(model.flops) / seconds / 1e12, "TFLOP/s")
        return floor.ms, floor.ms / latency_ms, achieved

    def peak_label(self, achieved: Achieved | None, dtype: str = "bfloat16") -> str | None:
        """The peak a floor was computed from: "3350 GB/s (H100 SXM)" for a memory-bound
        workload, "989 TFLOP/s bfloat16 (H100 SXM)" for a compute-bound one; None if unknown.

        A floor means nothing without the peak behind it: a contestant on another GPU, or one
        who doubts the datasheet figure, needs to see which number was assumed.
        """
        if self._peak is None or achieved is None:
            return None
        if achieved.unit == "GB/s":
            return f"{self._peak.bandwidth_gbs:g} GB/s ({self._peak.name})"
        return f"{self._peak.tflops(dtype):g} TFLOP/s {dtype} ({self._peak.name})"
