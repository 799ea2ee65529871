"""CUDA target architectures: parse what a contestant writes, detect the GPU, emit flags.

Why this exists: ``sm_100`` and ``sm_100a`` are different targets. Blackwell-only instructions
(tcgen05, TMEM) and Hopper's wgmma only exist in the arch-specific ``a`` targets, so a kernel
built for plain ``sm_100`` silently loses them or fails to assemble. Every spelling people use
("sm_90a", "90a", "9.0a", "compute_100a") maps to one :class:`CudaArch`, and every tool gets the
form it wants (nvcc ``-gencode``, ``TVM_FFI_CUDA_ARCH_LIST``, ``TORCH_CUDA_ARCH_LIST``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from fib_core.errors import BuildError

ARCH_ENV = "FIB_CUDA_ARCH"

_FORMS = re.compile(
    r"^(?:sm_?|compute_?)?(?:(?P<dotted>\d{1,2})\.(?P<minor>\d)|(?P<packed>\d{2,3}))(?P<suffix>[af]?)$"
)


@dataclass(frozen=True)
class CudaArch:
    """One compute capability plus its feature suffix ("a": arch-specific, "f": family)."""

    major: int
    minor: int
    suffix: str = ""

    def __post_init__(self) -> None:
        if not 3 <= self.major <= 15 or not 0 <= self.minor <= 9:
            raise BuildError(
                f"cuda_arch: compute capability {self.major}.{self.minor} is not a CUDA GPU "
                "(write e.g. sm_90a for H100/H200 or sm_100a for B200)"
            )
        if self.suffix not in ("", "a", "f"):
            raise BuildError(f"cuda_arch: unknown suffix {self.suffix!r} (use '', 'a' or 'f')")

    @property
    def sm(self) -> str:
        """``sm_90a`` form (what nvcc's ``code=`` and contestants write)."""
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def dotted(self) -> str:
        """``9.0a`` form (TVM_FFI_CUDA_ARCH_LIST, TORCH_CUDA_ARCH_LIST)."""
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def gencode(self) -> str:
        """The nvcc flag that builds real machine code (SASS) for exactly this target."""
        digits = f"{self.major}{self.minor}{self.suffix}"
        return f"-gencode=arch=compute_{digits},code=sm_{digits}"


def parse_cuda_arch(text: str) -> list[CudaArch]:
    """Parse one or more targets separated by commas, semicolons or spaces.

    >>> [a.sm for a in parse_cuda_arch("9.0a, sm_100a")]
    ['sm_90a', 'sm_100a']
    """
    parts = [p for p in re.split(r"[,;\s]+", str(text).strip()) if p]
    if not parts:
        raise BuildError(
            "cuda_arch is empty: write e.g. sm_90a (H100/H200) or sm_100a (B200) under [build] "
            f"in config.toml, or set {ARCH_ENV}"
        )
    archs: list[CudaArch] = []
    for part in parts:
        m = _FORMS.match(part.lower())
        if m is None:
            raise BuildError(
                f"cuda_arch: cannot read {part!r}; write sm_90a, sm_100a, 90a, 9.0a or 10.0a "
                f"(under [build] in config.toml or in {ARCH_ENV})"
            )
        if m["packed"]:
            major, minor = int(m["packed"][:-1]), int(m["packed"][-1])
        else:
            major, minor = int(m["dotted"]), int(m["minor"])
        arch = CudaArch(major, minor, m["suffix"])
        if arch not in archs:
            archs.append(arch)
    return archs


def arch_for_capability(major: int, minor: int) -> CudaArch:
    """The target a kernel on this GPU should use: arch-specific ("a") from Hopper on.

    Hopper (9.0) -> sm_90a, B200 (10.0) -> sm_100a: the contest kernels need the
    arch-specific instructions, and a binary built for one of these runs only there anyway.
    """
    return CudaArch(major, minor, "a" if major >= 9 else "")


def detect_cuda_arch() -> list[CudaArch] | None:
    """The current GPU's target, or None when torch sees no CUDA device."""
    try:
        # Imported here: torch is optional (takes ~3 s to load); without it there is no GPU to target.
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return [arch_for_capability(major, minor)]


def resolve_cuda_arch(requested: str | None) -> list[CudaArch]:
    """Explicit option, else ``$FIB_CUDA_ARCH``, else the GPU; no GPU and nothing set: error."""
    if requested:
        return parse_cuda_arch(requested)
    env = os.environ.get(ARCH_ENV, "").strip()
    if env:
        return parse_cuda_arch(env)
    detected = detect_cuda_arch()
    if detected:
        return detected
    raise BuildError(
        "no CUDA GPU to detect the target arch from: set cuda_arch under [build] in config.toml "
        f'(e.g. cuda_arch = "sm_100a" for B200, "sm_90a" for H100/H200) or the environment '
        f"variable {ARCH_ENV}"
    )


def gencode_flags(archs: list[CudaArch]) -> list[str]:
    return [a.gencode for a in archs]


def arch_list_env(archs: list[CudaArch]) -> str:
    """Space-separated dotted form, as TVM_FFI_CUDA_ARCH_LIST expects."""
    return " ".join(a.dotted for a in archs)
