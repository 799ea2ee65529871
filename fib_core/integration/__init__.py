"""fib_core.integration: patch a library's entry points so serving code reaches apply/tracing.

    from fib_core.integration import install_flashinfer_integrations
    install_flashinfer_integrations()   # no-op without FlashInfer

Names and meaning follow the organizers' ``flashinfer_bench.integration``.
"""

from __future__ import annotations

from fib_core.apply.binding import ArgBinder

from .context import ContextStore
from .flashinfer import ADAPTERS, install_flashinfer_integrations, route_or_call
from .patch import PatchManager, PatchSpec, get_manager, resolve

__all__ = [
    "ADAPTERS",
    "ArgBinder",
    "ContextStore",
    "PatchManager",
    "PatchSpec",
    "get_manager",
    "install_flashinfer_integrations",
    "resolve",
    "route_or_call",
]
