"""BuildOptions validation and the cache folder default."""

from __future__ import annotations

from pathlib import Path

import pytest

from fib_core.compile import BuildOptions, default_cache_dir
from fib_core.errors import BuildError


def test_defaults_are_empty_and_cache_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    opts = BuildOptions()
    assert opts.cuda_arch is None and opts.extra_cuda_cflags == [] and opts.include_dirs == []
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    assert opts.resolved_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FIB_CACHE_DIR")
    assert default_cache_dir() == Path("~/.cache/fib_core").expanduser()
    assert BuildOptions(cache_dir=tmp_path).resolved_cache_dir() == tmp_path


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"extra_cuda_cflags": "-O3"}, "extra_cuda_cflags"),
        ({"include_dirs": [1]}, "include_dirs"),
        ({"cuda_arch": 90}, "cuda_arch"),
        ({"lock_timeout_s": -1}, "lock_timeout_s"),
    ],
)
def test_bad_values_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(BuildError) as info:
        BuildOptions(**kwargs)
    assert f"BuildOptions.{field}" in str(info.value)
