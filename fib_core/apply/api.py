"""The public apply entry points: ``apply``, ``enable_apply``/``disable_apply`` and the hook.

One process-wide runtime (or none). With none enabled, an applied function is its original
self plus the cost of binding its arguments for the hook; with one, each call is routed by
key. The hook (``set_apply_hook``) sees every call of an applied function, routed or not:
the tracer installs itself there to record live workloads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import hook as _hooks
from . import runtime as _runtimes
from .binding import ArgBinder
from .config import ApplyConfig
from .hook import get_apply_hook, set_apply_hook
from .runtime import (
    MISS,
    ApplyMissError,
    ApplyRuntime,
    get_runtime,
    result_or_fallback,
    set_runtime,
)


def apply(
    def_name_or_resolver: str | Callable[..., str],
    runtime_kwargs: dict[str, Any] | None = None,
    fallback: Callable[..., Any] | None = None,
) -> Any:
    """Route calls to the best recorded solution of a definition.

    Decorator mode (no ``runtime_kwargs``)::

        @apply("gdn_decode_qk4_v8_d128_k_last")
        def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale): ...

    Function mode: resolve and call now; ``fallback(**runtime_kwargs)`` runs on a miss (an
    ApplyMissError if there is none)::

        out = apply("gdn_decode_qk4_v8_d128_k_last", runtime_kwargs=kw, fallback=my_decode)

    ``def_name_or_resolver`` is a definition name or a function of the call's arguments that
    returns one.
    """
    if runtime_kwargs is not None:
        return _call_now(def_name_or_resolver, runtime_kwargs, fallback)
    if not (isinstance(def_name_or_resolver, str) or callable(def_name_or_resolver)):
        raise TypeError("apply() takes a definition name or a resolver function")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        binder = ArgBinder(fn)
        if isinstance(def_name_or_resolver, str):
            fixed_name = def_name_or_resolver
            resolver = None
        else:
            fixed_name = None
            resolver = def_name_or_resolver

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _hooks.current is None and _runtimes.current is None:
                return fn(*args, **kwargs)
            def_name = fixed_name if resolver is None else resolver(*args, **kwargs)
            result = _observe_and_route(def_name, binder.bind(args, kwargs))
            return fn(*args, **kwargs) if result is MISS else result

        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
        wrapper.__fib_apply__ = def_name_or_resolver  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _call_now(
    def_name_or_resolver: str | Callable[..., str],
    runtime_kwargs: dict[str, Any],
    fallback: Callable[..., Any] | None,
) -> Any:
    if isinstance(def_name_or_resolver, str):
        def_name = def_name_or_resolver
    else:
        def_name = def_name_or_resolver(**runtime_kwargs)
    result = _observe_and_route(def_name, runtime_kwargs)
    fix = "call enable_apply() first" if _runtimes.current is None else "record traces for them"
    return result_or_fallback(result, def_name, runtime_kwargs, fallback, fix)


def _observe_and_route(def_name: str, runtime_kwargs: Mapping[str, Any]) -> Any:
    """Show the call to the hook (when set), then route it through the runtime (when
    enabled): the solution's result, or MISS."""
    hook, runtime = _hooks.current, _runtimes.current
    if hook is not None:
        hook(def_name, runtime_kwargs)
    return MISS if runtime is None else runtime.route(def_name, runtime_kwargs)


class ApplyHandle:
    """Enables an apply runtime over a dataset; :func:`enable_apply` returns one.

    Call it like function-mode ``apply``, or use it as a context manager that restores the
    previous runtime on exit:

    >>> with enable_apply("my-dataset") as handle:  # doctest: +SKIP
    ...     out = handle("gdn_decode_qk4_v8_d128_k_last", runtime_kwargs=kw, fallback=f)
    """

    def __init__(
        self,
        dataset_path: str | Path | None = None,
        config: ApplyConfig | None = None,
        **runtime_options: Any,
    ) -> None:
        self.runtime = ApplyRuntime(dataset_path, config, **runtime_options)
        self._previous = set_runtime(self.runtime)

    def __call__(
        self,
        def_name_or_resolver: str | Callable[..., str],
        runtime_kwargs: dict[str, Any] | None = None,
        fallback: Callable[..., Any] | None = None,
    ) -> Any:
        if runtime_kwargs is None:
            return apply(def_name_or_resolver)
        return _call_now(def_name_or_resolver, runtime_kwargs, fallback)

    def __enter__(self) -> ApplyHandle:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if _runtimes.current is self.runtime:
            set_runtime(self._previous)
        self.runtime.close()
        return False


def enable_apply(
    dataset_path: str | Path | None = None,
    apply_config: ApplyConfig | None = None,
    **runtime_options: Any,
) -> ApplyHandle:
    """Enable a process-wide apply runtime over a dataset's traces and return its handle.

    ``dataset_path`` defaults to ``$FIB_DATASET_PATH``. ``runtime_options`` go to
    :class:`ApplyRuntime` (``build_options``, ``cache_dir``)::

        enable_apply("my-dataset", ApplyConfig(max_atol=1e-2, on_miss_policy="use_def_best"))
    """
    return ApplyHandle(dataset_path, apply_config, **runtime_options)


def disable_apply() -> None:
    """Drop the process-wide runtime: applied functions call their originals again."""
    runtime = set_runtime(None)
    if runtime is not None:
        runtime.close()


__all__ = [
    "ApplyHandle",
    "ApplyMissError",
    "apply",
    "disable_apply",
    "enable_apply",
    "get_apply_hook",
    "get_runtime",
    "set_apply_hook",
    "set_runtime",
]
