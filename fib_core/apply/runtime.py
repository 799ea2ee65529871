"""ApplyRuntime: runs the solution the ApplyTable picks for a call, or reports a miss.

Solutions are built with :func:`fib_core.compile.build`, the same builders the benchmark
uses, so a routed call runs exactly the code that was measured. At start the runtime builds
the first ``ceil(aot_ratio * n)`` of each definition's routed solutions (most-winning first),
the rest on first use. A solution that fails to build is reported once and its keys miss.

Calling convention of a routed call: the runtime kwargs hold the definition's inputs by name.
If they also hold every output by name (the caller's function writes into outputs), the
solution writes there (a value-returning solution's results are copied in); otherwise a
destination-passing solution gets outputs allocated from the definition's shapes. The result
is the single output, or the tuple of outputs in the definition's order.

Start-up: ``import fib_core`` binds ``fib.apply`` eagerly, so this module's top imports only
what is light. The trace schema (pydantic: about 170 ms on a CPU where this package takes 90),
the builders (about 25 ms) and the definition registry (about 5 ms) are imported inside the
functions that first need them, when a runtime starts, builds or warns.
"""

from __future__ import annotations

import difflib
import math
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fib_core.errors import FibError, FibWarning

from .config import ApplyConfig
from .key import ApplyKeyBuilder, ApplyKeyError, ApplyKeyFactory, AxesOnlyKeyBuilder
from .table import ApplyTable

MISS = object()
"""Returned by :meth:`ApplyRuntime.route` when no solution is recorded for a call."""


current: ApplyRuntime | None = None


def get_runtime() -> ApplyRuntime | None:
    """The process-wide runtime, or None when apply is off."""
    return current


def set_runtime(rt: ApplyRuntime | None) -> ApplyRuntime | None:
    """Install ``rt`` process-wide (None: apply off); returns the previous one, not closed."""
    global current
    previous, current = current, rt
    return previous


class ApplyMissError(FibError, LookupError):
    """A function-mode ``apply`` call found no solution and was given no fallback."""


class _Plan:
    """Per-definition call plan, precomputed so a routed call does little work.

    With the default key builder the routes are also kept by the bare tuple of axis values
    (``fast_routes``), which skips building an ApplyKey per call.
    """

    __slots__ = (
        "best",
        "builder",
        "definition",
        "device_input",
        "fast_routes",
        "inputs",
        "out_specs",
        "outputs",
        "routes",
    )

    def __init__(self, definition: Any, table: ApplyTable, builder: ApplyKeyBuilder) -> None:
        from fib_core.data.dtypes import torch_dtype  # here for start-up time (module docstring)

        self.definition = definition
        self.builder = builder
        self.inputs = tuple(definition.inputs)
        self.outputs = tuple(definition.outputs)
        consts = definition.const_axes
        order = {axis: i for i, axis in enumerate(sorted(definition.var_axis_bindings))}
        specs = []
        for spec in definition.outputs.values():
            dims = []
            for d in spec.shape or ():
                if d in consts:
                    dims.append((False, consts[d]))
                elif d in order:
                    dims.append((True, order[d]))
                else:
                    raise ApplyKeyError(
                        f"{definition.name}: output axis {d!r} is not readable from any input; "
                        "apply cannot size this output"
                    )
            specs.append((tuple(dims), torch_dtype(spec.dtype)))
        self.out_specs = tuple(specs)
        self.device_input = next(
            (n for n, spec in definition.inputs.items() if spec.shape is not None), None
        )
        routes = table.definitions.get(definition.name)
        self.routes = {} if routes is None else routes.routes
        self.best = None if routes is None else routes.best
        fast = (
            type(builder).build_from_runtime is AxesOnlyKeyBuilder.build_from_runtime
            and type(builder).features is AxesOnlyKeyBuilder.features
        )
        self.fast_routes = (
            {k.axes: v for k, v in self.routes.items() if not k.feats} if fast else None
        )


class ApplyRuntime:
    """Routes calls by key to recorded solutions.

    >>> rt = ApplyRuntime("path/to/dataset", ApplyConfig(aot_ratio=0.0))  # doctest: +SKIP
    >>> out = rt.dispatch("gdn_decode_qk4_v8_d128_k_last", kwargs, fallback=my_fn)  # doctest: +SKIP
    """

    def __init__(
        self,
        traceset: Any = None,
        config: ApplyConfig | None = None,
        *,
        build_options: Any = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if config is not None and not isinstance(config, ApplyConfig):
            raise TypeError(
                f"apply: the config is a {type(config).__name__}; pass an ApplyConfig, e.g. "
                "ApplyConfig(max_atol=1e-2)"
            )
        self.config = config if config is not None else ApplyConfig()
        self.build_options = build_options
        self._unknown: set[str] = set()  # definition names warned about
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._runnables: dict[str, Any] = {}
        self._failed: dict[str, str] = {}
        self.stats = {"hits": 0, "misses": 0, "builds": 0}
        self._load(traceset)

    # --- setup ----------------------------------------------------------------------------

    def _load(self, trace_set_or_path: Any) -> None:
        from fib_core.data import TraceSet  # here for start-up time (module docstring)

        if trace_set_or_path is None or isinstance(trace_set_or_path, (str, Path)):
            trace_set = TraceSet.from_path(trace_set_or_path)
        elif isinstance(trace_set_or_path, TraceSet):
            trace_set = trace_set_or_path
        else:
            raise TypeError(
                f"apply: the dataset is a {type(trace_set_or_path).__name__}; pass a TraceSet, "
                "a dataset folder, or None ($FIB_DATASET_PATH)"
            )
        self.trace_set = trace_set
        self.table = ApplyTable.load_or_build(trace_set, self.config, self.cache_dir)
        self._plans: dict[str, _Plan] = {}
        for name in self.table.definitions:
            definition = trace_set.definitions[name]
            self._plans[name] = _Plan(
                definition, self.table, ApplyKeyFactory.specialize(definition)
            )
        self.aot_built: list[str] = []
        for routes in self.table.definitions.values():
            ranked = routes.ranked_solutions()
            if routes.best is not None and routes.best not in ranked:
                ranked.append(routes.best)
            for name in ranked[: math.ceil(self.config.aot_ratio * len(ranked))]:
                if self._runnable(name) is not None:
                    self.aot_built.append(name)

    def rebuild(self, traceset: Any = None, config: ApplyConfig | None = None) -> None:
        """Reload the table (new traces or config); keeps built solutions that still route."""
        if config is not None:
            self.config = config
        source = traceset if traceset is not None else self.trace_set
        self._failed = {}
        self._load(source)
        wanted = {s for r in self.table.definitions.values() for s in r.routes.values()}
        wanted |= {r.best for r in self.table.definitions.values() if r.best}
        for name in list(self._runnables):
            if name not in wanted:
                self._runnables.pop(name).close()

    def close(self) -> None:
        """Release every built solution (their cached builds stay on disk)."""
        runnables, self._runnables = self._runnables, {}
        for runnable in runnables.values():
            runnable.close()

    # --- building -------------------------------------------------------------------------

    @property
    def built_solutions(self) -> list[str]:
        return sorted(self._runnables)

    def _runnable(self, name: str) -> Any:
        runnable = self._runnables.get(name)
        if runnable is not None or name in self._failed:
            return runnable
        with self._lock:
            runnable = self._runnables.get(name)
            if runnable is not None or name in self._failed:
                return runnable
            from fib_core.compile import build  # here for start-up time (module docstring)

            solution = self.trace_set.get_solution(name)
            if solution is None:
                self._failed[name] = "not in the dataset"
                return None
            try:
                definition = self.trace_set.get_definition(solution.definition)
                runnable = build(solution, definition, self.build_options)
            except FibError as err:
                self._failed[name] = str(err)
                warnings.warn(f"apply: solution {name!r} not used: {err}", stacklevel=3, category=FibWarning)
                return None
            self.stats["builds"] += 1
            self._runnables[name] = runnable
            return runnable

    # --- dispatch -------------------------------------------------------------------------

    def route(self, def_name: str, runtime_kwargs: Mapping[str, Any]) -> Any:
        """Run the recorded solution for this call and return its result, or :data:`MISS`."""
        plan = self._plans.get(def_name)
        if plan is None:
            self.stats["misses"] += 1
            if def_name not in self.trace_set.definitions and def_name not in self._unknown:
                self._warn_unknown(def_name)  # (a known definition the dataset lacks is fine)
            return MISS
        if plan.fast_routes is not None:
            axes = plan.builder._read_axes(runtime_kwargs)
            name = plan.fast_routes.get(axes)
        else:
            axes = None
            name = plan.routes.get(plan.builder.build_from_runtime(runtime_kwargs))
        if name is None and self.config.on_miss_policy == "use_def_best":
            name = plan.best
        runnable = None if name is None else self._runnables.get(name) or self._runnable(name)
        if runnable is None:
            self.stats["misses"] += 1
            return MISS
        self.stats["hits"] += 1
        return _call(plan, runnable, runtime_kwargs, axes)

    def _warn_unknown(self, def_name: str) -> None:
        """Once per name: a name neither the dataset nor the kit's definitions know is most
        often a typo (a model calling a known definition the dataset has no traces for is not)."""
        from fib_core.dataset import registry  # here for start-up time (module docstring)

        self._unknown.add(def_name)
        try:
            known = registry.definitions()
        except FibError:  # a broken definition folder: the scripts say so elsewhere
            known = []
        if def_name in known:
            return
        names = sorted({*self.trace_set.definitions, *known})
        close = difflib.get_close_matches(def_name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        warnings.warn(
            f"apply: no definition is named {def_name!r}{hint}; its calls run the "
            "original function (or the fallback)",
            stacklevel=4,
            category=FibWarning,
        )

    def dispatch(
        self,
        def_name: str,
        runtime_kwargs: Mapping[str, Any],
        fallback: Callable[..., Any] | None = None,
    ) -> Any:
        """Run the recorded solution, else ``fallback(**runtime_kwargs)``, else raise."""
        result = self.route(def_name, runtime_kwargs)
        return result_or_fallback(
            result, def_name, runtime_kwargs, fallback, "record traces for them"
        )


def result_or_fallback(
    result: Any,
    def_name: str,
    runtime_kwargs: Mapping[str, Any],
    fallback: Callable[..., Any] | None,
    fix: str,
) -> Any:
    """``result`` when a solution ran; on a MISS ``fallback(**runtime_kwargs)``, or, without
    a fallback, an ApplyMissError naming the definition and ``fix`` (what the caller can do)."""
    if result is not MISS:
        return result
    if fallback is None:
        raise ApplyMissError(
            f"apply: no solution routed for {def_name} at this call's shapes and no fallback "
            f"given; pass fallback= or {fix}"
        )
    return fallback(**runtime_kwargs)


def _call(plan: _Plan, runnable: Any, kw: Mapping[str, Any], axes: tuple | None) -> Any:
    inputs = [kw.get(n) for n in plan.inputs]
    given = [kw.get(n) for n in plan.outputs]
    caller_outputs = None not in given
    if runnable.dps:
        outputs = given if caller_outputs else _allocate(plan, kw, axes)
        runnable.fn(*inputs, *outputs)
        result = tuple(outputs)
    else:
        result = runnable.run(inputs)
        if caller_outputs:
            for dst, src in zip(given, result, strict=True):
                dst.copy_(src)
            result = tuple(given)
    return result[0] if len(result) == 1 else result


def _allocate(plan: _Plan, kw: Mapping[str, Any], axes: tuple | None) -> list[Any]:
    # Imported here: keeps torch (~3 s to load) out of `import fib_core`.
    import torch

    if axes is None:
        axes = plan.builder._read_axes(kw)
    device = None if plan.device_input is None else kw[plan.device_input].device
    empty = torch.empty
    return [
        empty([axes[d][1] if var else d for var, d in dims], dtype=dtype, device=device)
        for dims, dtype in plan.out_specs
    ]
