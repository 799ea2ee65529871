"""Adapters that send FlashInfer's calls of this contest's operators through apply and tracing.

``install_flashinfer_integrations()`` patches each entry point that exists in the installed
FlashInfer and skips the rest silently (FlashInfer absent: nothing happens). A patched call
becomes a function-mode ``apply`` of the matching definition: the tracer sees it, and with a
runtime enabled the recorded solution runs; otherwise (or when the call does not fit the
definition's constant sizes or options) the original FlashInfer function runs unchanged.

Covered: GDN decode (:class:`GDNDecodeAdapter`), the FP8 block-scale MoE
(:class:`MoEFP8BlockScaleAdapter`) and the attention wrappers' ``plan``/``run`` pairs
(:class:`GQAPagedDecodeAdapter`, :class:`GQAPagedPrefillAdapter`, :class:`RaggedPrefillAdapter`,
:class:`MLAPagedAdapter`; each module's docstring gives its definition-naming rule). This
contest's five definitions include no attention, so with its dataset the attention wrappers
always fall back to FlashInfer; they route once a dataset holds a definition of the derived
name. Not covered: FlashInfer's GDN prefill (``chunk_gated_delta_rule``) takes precomputed
gates (g, beta) rather than the definition's A_log/a/dt_bias/b, and the DSA kernels have no
stable public entry point; call ``apply`` in the model code for those.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ..patch_manager import get_manager
from . import adapters
from .adapters import (
    GDNDecodeAdapter,
    GQAPagedDecodeAdapter,
    GQAPagedPrefillAdapter,
    MLAPagedAdapter,
    MoEFP8BlockScaleAdapter,
    RaggedPrefillAdapter,
)
from .common import route_or_call

ADAPTER_CLASSES: tuple[type, ...] = (
    GDNDecodeAdapter,
    MoEFP8BlockScaleAdapter,
    GQAPagedDecodeAdapter,
    GQAPagedPrefillAdapter,
    RaggedPrefillAdapter,
    MLAPagedAdapter,
)


def install_flashinfer_integrations() -> list[str]:
    """Patch every covered FlashInfer entry point that exists; returns the patched paths.

    Safe to call more than once; returns [] when FlashInfer is not installed::

        from fib_core.integration import install_flashinfer_integrations
        install_flashinfer_integrations()
    """
    if importlib.util.find_spec("flashinfer") is None:
        return []
    manager = get_manager()
    installed = []
    for cls in ADAPTER_CLASSES:
        adapter: Any = cls()
        for spec in adapter.targets():
            try:
                ok = manager.patch(spec, adapter.make_wrapper)
            except Exception:  # a FlashInfer that fails to import part of itself: skip quietly
                ok = False
            if ok:
                installed.append(spec.path)
    return installed


__all__ = [
    *adapters.__all__,
    "ADAPTER_CLASSES",
    "get_manager",
    "install_flashinfer_integrations",
    "route_or_call",
]
