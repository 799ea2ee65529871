"""PatchManager: swap a library's function or method for a wrapper, and put it back.

A target is named by a dotted path (``pkg.module.function`` or ``pkg.module.Class.method``);
the manager imports the longest importable module prefix and walks the attributes that
remain. A target that does not exist (library absent, older version) is not an error:
:meth:`PatchManager.patch` returns False and the caller moves on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PATCH_KINDS = ("function", "method")


@dataclass(frozen=True)
class PatchSpec:
    """What to patch: ``path`` (dotted), ``kind`` ("function" or "method"), ``name`` (the
    adapter's name, for reports) and ``ctx_key`` (the ContextStore slot a plan/run pair of
    wrappers shares, if any).

    >>> PatchSpec("flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose", "function",
    ...           "gdn_decode")
    PatchSpec(path='flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose', kind='function', name='gdn_decode', ctx_key=None)
    """

    path: str
    kind: str
    name: str
    ctx_key: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in PATCH_KINDS:
            raise ValueError(f"PatchSpec.kind: found {self.kind!r}, expected one of {PATCH_KINDS}")
        if not self.path or "." not in self.path:
            raise ValueError(f"PatchSpec.path: found {self.path!r}, expected 'module.attribute'")


WrapperFactory = Callable[[PatchSpec, Callable[..., Any]], Callable[..., Any]]


@dataclass
class _Installed:
    spec: PatchSpec
    owner: Any
    attr: str
    raw: Any  # what owner.__dict__ held (keeps staticmethod/classmethod wrappers intact)


def resolve(path: str) -> tuple[Any, str] | None:
    """(owner, attribute name) of a dotted path, or None if any part is missing."""
    parts = path.split(".")
    module = None
    split = 0
    for i in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        split = i
        break
    if module is None:
        return None
    owner: Any = module
    for part in parts[split:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    if not hasattr(owner, parts[-1]):
        return None
    return owner, parts[-1]


class PatchManager:
    """Installs wrappers on library entry points; idempotent per path.

    >>> manager = get_manager()
    >>> manager.patch(PatchSpec("json.dumps", "function", "demo"),
    ...               lambda spec, orig: lambda *a, **k: orig(*a, **k))
    True
    >>> manager.unpatch_all()
    """

    def __init__(self) -> None:
        self._installed: dict[str, _Installed] = {}

    def is_patched(self, path: str) -> bool:
        return path in self._installed

    @property
    def patched(self) -> list[PatchSpec]:
        return [item.spec for item in self._installed.values()]

    def patch(self, spec: PatchSpec, wrapper_factory: WrapperFactory) -> bool:
        """Wrap the target with ``wrapper_factory(spec, original)``; False if it does not exist.
        Patching a path twice keeps the first wrapper."""
        if spec.path in self._installed:
            return True
        found = resolve(spec.path)
        if found is None:
            return False
        owner, attr = found
        if spec.kind == "method" and not isinstance(owner, type):
            return False
        raw = owner.__dict__.get(attr) if hasattr(owner, "__dict__") else None
        if raw is None:
            raw = getattr(owner, attr)
        if isinstance(raw, (staticmethod, classmethod)):
            original = raw.__func__
        else:
            original = getattr(owner, attr) if spec.kind == "function" else raw
        if not callable(original):
            return False
        wrapper = wrapper_factory(spec, original)
        if isinstance(raw, staticmethod):
            wrapper = staticmethod(wrapper)
        elif isinstance(raw, classmethod):
            wrapper = classmethod(wrapper)
        setattr(owner, attr, wrapper)
        self._installed[spec.path] = _Installed(spec, owner, attr, raw)
        return True

    def unpatch(self, path: str) -> bool:
        item = self._installed.pop(path, None)
        if item is None:
            return False
        setattr(item.owner, item.attr, item.raw)
        return True

    def unpatch_all(self) -> None:
        """Restore every patched target, newest first."""
        for path in reversed(list(self._installed)):
            self.unpatch(path)


_manager: PatchManager | None = None


def get_manager() -> PatchManager:
    """The process-wide PatchManager."""
    global _manager
    if _manager is None:
        _manager = PatchManager()
    return _manager
