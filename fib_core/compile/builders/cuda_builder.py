"""``CUDABuilder``: the organizers' builder for compiled (``cuda`` / ``cpp``) solutions."""

from __future__ import annotations

from typing import Any

from ..builder import Builder, language_is


class CUDABuilder(Builder):
    """CUDA/C++ sources, compiled by the kit's tvm-ffi or torch-extension builder (chosen by
    ``spec.binding``) into the disk cache; ``clear_cache`` closes the loaded modules only."""

    def __init__(self) -> None:
        super().__init__()

    def can_build(self, sol: Any) -> bool:
        return language_is(sol, "cuda", "cpp")

    def clear_cache(self) -> None:
        super().clear_cache()
