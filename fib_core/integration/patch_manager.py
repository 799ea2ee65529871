"""The organizers' module path of the patch manager (``fib_core.integration.patch_manager``):
the same objects as :mod:`fib_core.integration.patch`."""

from __future__ import annotations

from .patch import PatchManager, PatchSpec, get_manager

__all__ = ["PatchManager", "PatchSpec", "get_manager"]
