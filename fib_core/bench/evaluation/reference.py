"""The reference: the definition's own ``run`` on the same inputs, computed once and kept on disk.

References are plain PyTorch and can be far slower than the kernel under test (seconds for a big
MoE workload), so their outputs are cached under ``$FIB_CACHE_DIR/reference/`` keyed by
(definition content hash, workload uuid, seed, device kind, input set) plus a fingerprint of the
workload record and of the structured input generator, since either changes the inputs. The
reference's latency is cached beside it, keyed also by the GPU name and the timing settings.

A cache that cannot be written is a warning, never a failure: the run just recomputes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors import safe_open

from fib_core.atomic import atomic_write
from fib_core.dataset import registry
from fib_core.dataset.references import ReferenceFailure, reference_run
from fib_core.paths import cache_dir

if TYPE_CHECKING:
    from fib_core.data.definition import Definition
    from fib_core.data.workload import Workload

log = logging.getLogger("fib_core.bench")

# Bump when the way inputs are generated changes: every cached reference becomes stale.
INPUTS_VERSION = "1"
_FAST: dict[str, Callable[..., Any]] = {}


def clone_args(values: Sequence) -> list:
    """Fresh copies of tensor arguments (scalars and None pass through), so callees cannot
    disturb the pristine inputs."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def normalise_outputs(definition: Definition, result: Any, who: str) -> list:
    """Outputs as a list in the definition's order (a single tensor, tuple, list or dict)."""
    names = definition.output_names
    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise ReferenceFailure(f"{who} returned a dict without {', '.join(missing)}")
        return [result[n] for n in names]
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]


def run_reference(definition: Definition, inputs: Sequence) -> list:
    """Call the reference on clones of the inputs and return its outputs in order."""
    fn = reference_run(definition)
    return reference_result(definition, fn(*clone_args(inputs)))


def reference_result(definition: Definition, result: Any, who: str = "the reference") -> list:
    """A reference's return value as the output list, checked against the definition."""
    outputs = normalise_outputs(definition, result, who)
    if len(outputs) != len(definition.output_names):
        raise ReferenceFailure(
            f"definition {definition.name!r}: {who} returned {len(outputs)} output(s), "
            f"the definition declares {len(definition.output_names)}"
        )
    # A reference that returns the wrong dtype would make every correct solution fail with a
    # message blaming the solution: name the reference instead.
    from fib_core.data.dtypes import torch_dtype

    for name, value in zip(definition.output_names, outputs, strict=True):
        want = torch_dtype(definition.outputs[name].dtype)
        got = getattr(value, "dtype", None)
        if got is not None and got != want:
            raise ReferenceFailure(
                f"definition {definition.name!r}: {who} returned output {name!r} as "
                f"{got}, the definition declares {definition.outputs[name].dtype}; fix the "
                "reference (not the solution)"
            )
    return outputs


def register_fast_reference(definition_name: str) -> Callable[[Callable], Callable]:
    """Decorator: a faster ``run`` with the same arithmetic as ``definition_name``'s reference.

    It computes the outputs of the input sets the reference is not timed on (see
    :mod:`fib_core.bench.evaluation.reference_sets`); the definition's own reference still gives the
    latency and the first sets. It must agree with the reference on every shape (a test
    compares them)."""

    def decorator(fn: Callable) -> Callable:
        _FAST[definition_name] = fn
        return fn

    return decorator


def fast_reference_for(definition_name: str) -> Callable[..., Any] | None:
    """The fast reference registered for a definition, else its definition folder's
    ``fast_reference.py`` (see :mod:`fib_core.dataset.registry`), else None."""
    if definition_name in _FAST:
        return _FAST[definition_name]

    entry = registry.get(definition_name)
    return entry.fast_reference if entry is not None else None


def reference_key(
    definition: Definition, workload: Workload, *, seed: int, device_kind: str, input_set: int
) -> str:
    """Cache key of one reference output set (hex)."""
    return reference_keys(definition, workload, seed=seed, device_kind=device_kind,
                          input_sets=[input_set])[0]


def reference_keys(
    definition: Definition,
    workload: Workload,
    *,
    seed: int,
    device_kind: str,
    input_sets: Sequence[int],
) -> list[str]:
    """Cache keys of several input sets of one workload, as :func:`reference_key` gives them
    one by one; the definition's content hash (its canonical JSON, hashed) is computed once,
    not once per set (the judge asks for 16 sets per workload)."""
    # Imported here: fib_core.bench.evaluation.inputs loads pydantic (~50 ms); this module's import does not.
    from fib_core.bench.evaluation.inputs import generator_fingerprint

    parts = {
        "definition": definition.content_hash(),
        "uuid": workload.uuid,
        "seed": seed,
        "device": device_kind,
        "set": None,
        "workload": workload.to_dict(),
        "generator": generator_fingerprint(definition.name),
        "inputs_version": INPUTS_VERSION,
    }
    keys = []
    for input_set in input_sets:
        parts["set"] = input_set
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
        keys.append(hashlib.sha256(text.encode()).hexdigest()[:32])
    return keys


class ReferenceCache:
    """Reference outputs (safetensors) and latencies (JSON) under one folder."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root if root is not None else cache_dir()) / "reference"

    def prefetch_outputs(self, definition: Definition, keys: Sequence[str]) -> None:
        """Get these output files ready to load (the signed cache verifies them side by side);
        here, nothing to do."""

    def close(self) -> None:
        """Stop whatever reads ahead (here, nothing)."""

    def forget_prefetched(self) -> None:
        """Drop what :meth:`prefetch_outputs` kept and was not loaded."""

    def _path(self, definition: Definition, key: str, suffix: str) -> Path:
        return self.root / definition.name / f"{key}{suffix}"

    def load_outputs(self, definition: Definition, key: str, device: str) -> list | None:
        path = self._path(definition, key, ".safetensors")
        if not path.exists():
            return None
        try:
            with safe_open(str(path), framework="pt", device="cpu") as fh:
                meta = fh.metadata() or {}
                scalars = set(json.loads(meta.get("scalars", "[]")))
                outputs = []
                for name in definition.output_names:
                    tensor = fh.get_tensor(name)
                    outputs.append(tensor.item() if name in scalars else tensor.to(device))
            return outputs
        except Exception as err:  # a torn or foreign file: recompute
            log.warning("reference cache %s unreadable (%s); recomputing", path, err)
            return None

    def store_outputs(self, definition: Definition, key: str, outputs: Sequence) -> None:
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch
        from safetensors.torch import save_file

        tensors, scalars = {}, []
        for name, value in zip(definition.output_names, outputs, strict=True):
            if isinstance(value, torch.Tensor):
                tensors[name] = value.detach().contiguous().cpu()
            else:
                tensors[name] = torch.tensor(value)
                scalars.append(name)
        path = self._path(definition, key, ".safetensors")
        write_cache_file(
            path,
            lambda tmp: save_file(tensors, str(tmp), metadata={"scalars": json.dumps(scalars)}),
        )

    def load_latency(self, definition: Definition, key: str) -> dict | None:
        path = self._path(definition, key, ".latency.json")
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def store_latency(self, definition: Definition, key: str, record: dict) -> None:
        path = self._path(definition, key, ".latency.json")
        write_cache_file(path, lambda tmp: tmp.write_text(json.dumps(record)))


def write_cache_file(path: Path, write: Callable[[Path], Any]) -> None:
    """Write a cache file atomically; an unwritable cache only logs a warning."""
    try:
        atomic_write(path, write)
    except Exception as err:  # OSError, or the safetensors writer's own error type
        log.warning(
            "cannot write the reference cache at %s (%s); set FIB_CACHE_DIR to a "
            "writable folder to keep references between runs",
            path,
            err,
        )


def reference_outputs(
    definition: Definition,
    workload: Workload,
    inputs: Sequence,
    *,
    seed: int,
    device: str,
    input_set: int,
    cache: ReferenceCache | None,
) -> tuple[list, bool]:
    """(outputs, came_from_cache) for one input set."""
    kind = device.split(":")[0]
    key = reference_key(definition, workload, seed=seed, device_kind=kind, input_set=input_set)
    if cache is not None:
        hit = cache.load_outputs(definition, key, device)
        if hit is not None:
            return hit, True
    outputs = run_reference(definition, inputs)
    if cache is not None:
        cache.store_outputs(definition, key, outputs)
    return outputs, False


def latency_key(
    definition: Definition,
    workload: Workload,
    *,
    seed: int,
    device_kind: str,
    hardware: str,
    timing: dict[str, Any],
) -> str:
    """Cache key of a reference latency: the outputs' key plus GPU name and timing settings."""
    base = reference_key(definition, workload, seed=seed, device_kind=device_kind, input_set=0)
    text = json.dumps({"base": base, "hardware": hardware, "timing": timing}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
