"""Workload inputs: seeded random tensors, scalars, safetensors blobs and structured generators.

Everything a solution sees is reproducible: one ``torch.Generator`` per (seed, workload uuid,
input set) drives all random numbers, and the seed is recorded in the trace. Random tensors are
generated in chunks directly on the target device (:mod:`.random_draws`), so a 1.4 GB fp8
weight never needs a multi-GB fp32 temporary.

Random numbers cannot make a valid page table or a sorted list of sequence offsets, so a
definition may register a *structured input generator* (``register_input_generator``) that
supplies such inputs; it overrides the random ones, never an explicit scalar or blob.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.bench.evaluation.memory_budget import check_fits, tensor_bytes
from fib_core.bench.evaluation.random_draws import make_generator, random_scalar, random_tensor
from fib_core.data.blobs import load_blob_tensor as read_blob_tensor
from fib_core.data.blobs import resolve_blob_path
from fib_core.data.dtypes import dtype_name, torch_dtype
from fib_core.data.dtypes import dtype_name as name_of
from fib_core.data.workload import RandomInput, SafetensorsInput, ScalarInput
from fib_core.dataset import registry
from fib_core.errors import FibError, LfsPointerError

if TYPE_CHECKING:
    import torch

    from fib_core.data.definition import Definition
    from fib_core.data.workload import Workload

GeneratorFn = Callable[..., "dict[str, torch.Tensor]"]

_GENERATORS: dict[str, GeneratorFn] = {}


class InputError(FibError):
    """A workload's inputs cannot be produced (missing blob, wrong shape or dtype, bad generator)."""


def register_input_generator(definition_name: str) -> Callable[[GeneratorFn], GeneratorFn]:
    """Decorator: ``fn(definition, axes, gen, device) -> {input name: tensor}`` for a definition.

    ``axes`` holds every axis value (const and var). The returned tensors replace the random
    ones of the same names; inputs given as scalars or safetensors in the workload are kept.
    Registering again for the same name replaces the previous generator.

    A generator that also takes a ``wanted`` keyword gets the set of input names it may
    produce for this workload (the others come from the workload itself) and may skip making
    the rest: a timed run makes one input set per timed call, so work thrown away adds up.

    A generator that also takes a ``sets`` keyword can make many input sets in one call: given
    ``sets=n`` it returns every tensor with an extra leading axis of ``n`` (set ``j`` is
    ``tensor[j]``). The engine uses it only for the sets a run times but never checks
    (:func:`generate_timing_sets`), where one call replaces ``n`` calls of a few dozen small
    launches each; without the keyword those sets are made one by one.

        @register_input_generator("my_op")
        def make(definition, axes, gen, device, wanted=frozenset()):
            out = {"x": torch.randn(axes["n"], generator=gen, device=device)}
            if "lengths" in wanted:
                out["lengths"] = torch.full((axes["b"],), axes["n"], device=device)
            return out
    """

    def decorator(fn: GeneratorFn) -> GeneratorFn:
        _GENERATORS[definition_name] = fn
        return fn

    return decorator


def input_generator_for(definition_name: str) -> GeneratorFn | None:
    """The structured generator of a definition: one registered here, else its definition
    folder's ``generator.py`` (see :mod:`fib_core.dataset.registry`), else None."""
    if definition_name in _GENERATORS:
        return _GENERATORS[definition_name]

    entry = registry.get(definition_name)
    return entry.generator if entry is not None else None


def generator_fingerprint(definition_name: str) -> str:
    """A short hash of the generator's source: cached references depend on what it produces.

    The whole module the generator lives in counts, and so do the shared helpers of
    :mod:`fib_core.dataset.generators` it calls: a faster helper that draws other numbers
    must make every cached reference of that definition stale, not serve the old ones.
    """
    fn = input_generator_for(definition_name)
    return "none" if fn is None else _source_hash(fn)


@functools.lru_cache(maxsize=64)
def _source_hash(fn: Callable[..., Any]) -> str:
    """:func:`generator_fingerprint` of one generator function (sources do not change while a
    process runs; the judge asks for it for every cached set of every workload)."""
    # Imported here: fib_core.dataset loads torch (~3 s), which importing this module does not need.
    from fib_core.dataset import generators

    parts = []
    for obj in (sys.modules.get(fn.__module__), fn, generators):
        try:
            parts.append(inspect.getsource(obj) if obj is not None else "")
        except (OSError, TypeError):
            parts.append(f"{fn.__module__}.{fn.__qualname__}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def load_blob_tensor(
    name: str,
    path: Path,
    tensor_key: str,
    expected_shape: tuple[int, ...] | None,
    dtype_name: str,
) -> Any:
    """One tensor of a safetensors blob (read by :mod:`fib_core.data.blobs`, on CPU), checked
    against the definition's shape and dtype for input ``name``."""
    try:
        tensor = read_blob_tensor(path, tensor_key)
    except LfsPointerError:
        raise
    except FibError as err:
        raise InputError(f"input {name!r}: {err}") from None
    if expected_shape is None:
        if tensor.numel() != 1:
            raise InputError(f"{path}: {tensor_key!r} has shape {tuple(tensor.shape)}, "
                             f"expected one value for scalar input {name!r}")
        return tensor.item()
    if tuple(tensor.shape) != tuple(expected_shape):
        raise InputError(
            f"{path}: {tensor_key!r} has shape {tuple(tensor.shape)}, expected "
            f"{tuple(expected_shape)} for input {name!r} (from the workload's axes)"
        )
    found = name_of(tensor.dtype)
    if found != dtype_name:
        raise InputError(
            f"{path}: {tensor_key!r} has dtype {found}, expected {dtype_name} for input {name!r}"
        )
    return tensor


def all_axes(definition: Definition, workload: Workload) -> dict[str, int]:
    """Const axes of the definition plus the workload's var-axis values."""
    values = dict(definition.const_axes)
    values.update(workload.axes)
    return values


def generate_inputs(
    definition: Definition,
    workload: Workload,
    *,
    seed: int,
    device: str,
    dataset_root: str | Path | None,
    input_set: int = 0,
    blob_cache: dict | None = None,
) -> list:
    """The solution's positional inputs in the definition's order.

    Scalars are Python numbers; an optional input the workload does not list is None.
    ``input_set`` selects another independent draw of the random inputs (blobs and scalars are
    the same in every set); ``blob_cache`` lets several sets share one loaded blob tensor.
    """
    if input_set == 0:
        check_fits(definition, workload, device)
    shapes = definition.input_shapes(workload.axes)
    gen = make_generator(seed, workload.uuid, device, input_set)
    structured = _structured_inputs(definition, workload, gen, device, shapes)
    cache = blob_cache if blob_cache is not None else {}
    return _assemble(definition, workload, shapes, structured, gen, device, dataset_root, cache)


def generate_timing_sets(
    definition: Definition,
    workload: Workload,
    *,
    seed: int,
    device: str,
    dataset_root: str | Path | None,
    first: int,
    count: int,
    blob_cache: dict | None = None,
    chunk_bytes: int = 256 << 20,
) -> list[list]:
    """Input sets ``first .. first+count-1`` of a run that are timed and never checked.

    Their contents only have to differ from every other set's (so a kernel replaying results
    by input content gains nothing) and follow the inputs' distributions; no reference is ever
    computed for them. When the definition's generator takes the ``sets`` keyword, sets are
    drawn many at a time (up to ``chunk_bytes`` of tensors per draw) from one generator seeded
    from (seed, workload, first set of the draw), and each set's tensors are views of the
    draw's; otherwise each set is :func:`generate_inputs`'s, one by one.

    Example (the sets a 10-warm-up, 3x50-iteration run times after its 10 checked ones)::

        more = generate_timing_sets(definition, workload, seed=0, device="cuda",
                                    dataset_root=None, first=10, count=150)
    """
    fn = input_generator_for(definition.name)
    cache = blob_cache if blob_cache is not None else {}
    if count <= 0:
        return []
    if fn is None or not _takes(fn, "sets"):
        return [
            generate_inputs(definition, workload, seed=seed, device=device,
                            dataset_root=dataset_root, input_set=first + j, blob_cache=cache)
            for j in range(count)
        ]

    shapes = definition.input_shapes(workload.axes)
    _, sizes = tensor_bytes(definition, dict(workload.axes))
    per_set = sum(size for name, size in sizes if name in definition.inputs)
    step = max(1, min(count, chunk_bytes // max(per_set, 1)))
    out: list[list] = []
    for start in range(0, count, step):
        n = min(step, count - start)
        gen = make_generator(seed, f"{workload.uuid}|timing", device, first + start)
        structured = _structured_inputs(definition, workload, gen, device, shapes, sets=n)
        out += _assemble(
            definition, workload, shapes, structured, gen, device, dataset_root, cache, sets=n
        )
    return out


def _assemble(
    definition: Definition,
    workload: Workload,
    shapes: dict[str, tuple[int, ...] | None],
    structured: dict[str, Any],
    gen: Any,
    device: str,
    dataset_root: str | Path | None,
    cache: dict,
    sets: int | None = None,
) -> Any:
    """The positional inputs in the definition's order: one set (``sets`` None) or a list of
    ``sets`` sets, whose random and structured tensors are views of one draw each."""
    n = 1 if sets is None else sets
    columns: list[list] = []  # per input: its value in each set
    for name, spec in definition.inputs.items():
        source = workload.inputs.get(name)
        shape = shapes[name]
        if source is None:
            if name in structured:
                columns.append(_split(structured[name], sets))
                continue
            if spec.optional:
                columns.append([None] * n)
                continue
            raise InputError(
                f"workload {workload.uuid}: no entry for input {name!r} of definition "
                f"{definition.name!r}; add it to the workload's inputs"
            )
        if isinstance(source, ScalarInput):
            columns.append([_scalar_value(source.value, shape, spec.dtype, device)] * n)
        elif isinstance(source, SafetensorsInput):
            key = (source.path, source.tensor_key)
            if key not in cache:
                try:
                    path = resolve_blob_path(dataset_root, source.path)
                except FibError as err:
                    raise InputError(f"input {name!r}: {err}") from None
                loaded = load_blob_tensor(name, path, source.tensor_key, shape, spec.dtype)
                cache[key] = loaded.to(device) if hasattr(loaded, "to") else loaded
            columns.append([cache[key]] * n)
        elif isinstance(source, RandomInput):
            if name in structured:
                columns.append(_split(structured[name], sets))
            elif shape is None:
                columns.append([random_scalar(spec.dtype, gen) for _ in range(n)])
            else:
                lead = () if sets is None else (sets,)
                columns.append(_split(random_tensor((*lead, *shape), spec.dtype, gen, device), sets))
        else:  # pragma: no cover - the schema admits only the three kinds
            raise InputError(f"workload {workload.uuid}: input {name!r} has unknown kind {source!r}")
    rows = [list(values) for values in zip(*columns, strict=True)] if columns else [[]] * n
    return rows[0] if sets is None else rows


def _split(value: Any, sets: int | None) -> list:
    """One set's value (``sets`` None) or the ``sets`` views along a draw's leading axis (a
    scalar's values, given as a list)."""
    if sets is None:
        return [value]
    return list(value.unbind(0)) if hasattr(value, "unbind") else list(value)


def _scalar_value(value: Any, shape: tuple[int, ...] | None, dtype_name: str, device: str) -> Any:
    if shape is None:
        return value
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    return torch.full(shape, value, dtype=torch_dtype(dtype_name), device=device)


def _takes(fn: Callable[..., Any], keyword: str) -> bool:
    """Whether a generator accepts ``keyword`` (``wanted``, ``sets``: see
    register_input_generator); asked for every input set, so the answer is kept (for a
    generator that cannot be a cache key, such as an unhashable callable object, it is
    worked out each time)."""
    try:
        return _takes_cached(fn, keyword)
    except TypeError:  # unhashable
        return _signature_takes(fn, keyword)


@functools.lru_cache(maxsize=256)
def _takes_cached(fn: Callable[..., Any], keyword: str) -> bool:
    return _signature_takes(fn, keyword)


def _signature_takes(fn: Callable[..., Any], keyword: str) -> bool:
    try:
        return keyword in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _structured_inputs(
    definition: Definition,
    workload: Workload,
    gen: Any,
    device: str,
    shapes: dict[str, tuple[int, ...] | None],
    sets: int | None = None,
) -> dict[str, Any]:
    """The generator's inputs, checked against the definition (``sets``: many sets at once,
    each value with a leading axis of that size; see register_input_generator)."""
    fn = input_generator_for(definition.name)
    if fn is None:
        return {}
    axes = all_axes(definition, workload)
    keywords: dict[str, Any] = {} if sets is None else {"sets": sets}
    if _takes(fn, "wanted"):
        keywords["wanted"] = frozenset(
            name
            for name in definition.inputs
            if workload.inputs.get(name) is None or isinstance(workload.inputs[name], RandomInput)
        )
    produced = fn(definition, axes, gen, device, **keywords)
    if not isinstance(produced, dict):
        raise InputError(
            f"input generator of {definition.name!r} returned {type(produced).__name__}; "
            "it must return a dict of input name -> tensor"
        )

    for name, tensor in produced.items():
        if name not in definition.inputs:
            raise InputError(
                f"input generator of {definition.name!r} produced {name!r}, which is not an "
                f"input of the definition ({', '.join(definition.inputs)})"
            )
        expected = shapes[name]
        if expected is None:
            if sets is not None and (not isinstance(tensor, (list, tuple)) or len(tensor) != sets):
                raise InputError(
                    f"input generator of {definition.name!r}: scalar {name!r} must be a list of "
                    f"{sets} values when asked for {sets} sets"
                )
            continue
        spec = definition.inputs[name]
        if sets is not None:
            expected = (sets, *expected)
        if tuple(tensor.shape) != expected or dtype_name(tensor.dtype) != spec.dtype:
            raise InputError(
                f"input generator of {definition.name!r}: {name!r} is {dtype_name(tensor.dtype)} "
                f"{tuple(tensor.shape)}, expected {spec.dtype} {expected}"
            )
    return produced
