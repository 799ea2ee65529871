"""fib_core.integration: patch a library's entry points so serving code reaches apply/tracing.

    from fib_core.integration import install_flashinfer_integrations
    install_flashinfer_integrations()   # no-op without FlashInfer

Names and meaning follow the organizers' ``flashinfer_bench.integration``.
"""

from __future__ import annotations

from .flashinfer import (
    ADAPTER_CLASSES,
    GDNDecodeAdapter,
    MoEFP8BlockScaleAdapter,
    install_flashinfer_integrations,
    route_or_call,
)
from .patch_manager import PatchManager, PatchSpec, get_manager, resolve
from .utils import ArgBinder, ContextStore

__all__ = [
    "ADAPTER_CLASSES",
    "ArgBinder",
    "ContextStore",
    "GDNDecodeAdapter",
    "MoEFP8BlockScaleAdapter",
    "PatchManager",
    "PatchSpec",
    "get_manager",
    "install_flashinfer_integrations",
    "resolve",
    "route_or_call",
]
