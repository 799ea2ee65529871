"""Roofline figures for result rows, from ``fib_core.dataset.roofline`` when it can tell.

The table's "% of roofline" column answers "how far is this kernel from what the GPU allows":
floor / measured, where the floor is the slower of moving the workload's bytes at peak
bandwidth and doing its flops at peak throughput. Only the dataset package knows a workload's
cost and a GPU's peaks; for a definition or GPU it does not know (or on CPU) the figures stay
unknown instead of guessed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fib_core.report.results import Achieved

_LOOKUP_ERRORS = (KeyError, ValueError, TypeError, LookupError, AttributeError, ZeroDivisionError)


class RooflineView:
    """Cost and peak lookups for one definition on one GPU, failing soft to None."""

    def __init__(self, definition_name: str, gpu_name: str | None) -> None:
        self.definition_name = definition_name
        self.gpu_name = gpu_name
        self._api = _roofline_module()
        self._peak = self._detect_peak()

    def _detect_peak(self) -> Any:
        if self._api is None or not self.gpu_name:
            return None
        try:
            return self._api.detect_gpu_peak(self.gpu_name)
        except _LOOKUP_ERRORS:
            return None

    def figures(
        self, axes: dict[str, int], latency_ms: float, cost: dict[str, Any] | None = None
    ) -> tuple[float, float, Achieved | None] | None:
        """(floor_ms, roofline_fraction, achieved) for a workload, or None when unknown.

        ``cost`` is the engine's exact count from the workload's real inputs (the trace's
        ``performance.cost``: the MoE routing, the valid sparse indices); without it the
        dataset's axis-only model is used, which can only estimate data-dependent work.
        """
        if self._peak is None or latency_ms <= 0:
            return None
        try:
            if isinstance(cost, dict):
                cost = self._api.Cost(int(cost["bytes"]), int(cost["flops"]), str(cost["dtype"]))
            else:
                cost = self._api.workload_cost(self.definition_name, axes)
            floor_ms = float(self._api.roofline_floor_ms(cost, self._peak))
        except _LOOKUP_ERRORS:
            return None
        if floor_ms <= 0:
            return None
        return floor_ms, floor_ms / latency_ms, self._achieved(cost, latency_ms)

    def _achieved(self, cost: Any, latency_ms: float) -> Achieved | None:
        """GB/s when moving bytes bounds the workload, TFLOP/s when arithmetic does."""
        seconds = latency_ms / 1e3
        try:
            bound = getattr(self._api.roofline_floor_ms(cost, self._peak), "bound", None)
            if bound is None:  # a floor without its bound: compare the two floors ourselves
                memory = self._api.roofline_floor_ms(dataclasses.replace(cost, flops=0), self._peak)
                compute = self._api.roofline_floor_ms(
                    dataclasses.replace(cost, bytes=0), self._peak
                )
                bound = "memory" if float(memory) >= float(compute) else "compute"
        except _LOOKUP_ERRORS:
            return None
        if bound == "memory":
            return Achieved(float(cost.bytes) / seconds / 1e9, "GB/s")
        return Achieved(float(cost.flops) / seconds / 1e12, "TFLOP/s")


def _roofline_module() -> Any:
    try:
        from fib_core.dataset import roofline
    except ImportError:
        return None
    needed = ("detect_gpu_peak", "workload_cost", "roofline_floor_ms")
    return roofline if all(hasattr(roofline, n) for n in needed) else None
