"""BuildOptions: what a contestant controls about a build beyond the solution itself.

These settings change the binary, so the compiling builders fold the ones they use into the
cache key (beside ``Solution.hash()``, which covers the solution's own content).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fib_core.errors import BuildError
from fib_core.paths import CACHE_ENV as CACHE_ENV
from fib_core.paths import cache_dir as default_cache_dir


@dataclass
class BuildOptions:
    """Build settings; every field has a working default.

    ``cuda_arch``: "sm_90a", "sm_100a", "90a", "9.0a", "10.0a" (several: comma separated);
    None = ``$FIB_CUDA_ARCH``, else detected from the GPU. ``include_dirs`` that are relative
    are looked up inside the solution's sources first, then from the current folder.
    ``lock_timeout_s`` bounds the wait for another process building the same solution.
    """

    cuda_arch: str | None = None
    extra_cuda_cflags: list[str] = field(default_factory=list)
    extra_cflags: list[str] = field(default_factory=list)
    extra_ldflags: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    cache_dir: Path | None = None
    lock_timeout_s: float = 900.0

    def __post_init__(self) -> None:
        if self.cuda_arch is not None and not isinstance(self.cuda_arch, str):
            raise BuildError(
                f"BuildOptions.cuda_arch: found {self.cuda_arch!r}, expected a string such as "
                '"sm_100a"'
            )
        for name in ("extra_cuda_cflags", "extra_cflags", "extra_ldflags", "include_dirs"):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise BuildError(
                    f"BuildOptions.{name}: found {value!r}, expected a list of strings "
                    f'(e.g. {name} = ["..."] under [build] in config.toml)'
                )
            setattr(self, name, list(value))
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir).expanduser()
        if not isinstance(self.lock_timeout_s, (int, float)) or self.lock_timeout_s < 0:
            raise BuildError(
                f"BuildOptions.lock_timeout_s: found {self.lock_timeout_s!r}, expected seconds >= 0"
            )

    def resolved_cache_dir(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else default_cache_dir()
