"""Baseline latencies measured once per GPU model, library versions and timing settings.

A baseline's latency on a workload depends on the GPU model, the FlashInfer (and DeepGEMM)
version, the baseline's code and the timing settings (warm-up, iterations, trials, timer); it
does not depend on the contestant's kernel. So it is measured the first time a run needs it and
kept, one JSON file per (GPU model, versions, definition, baseline code, settings):

    <cache>/baselines/<gpu>/<flashinfer-0.7.2>/<definition>-<key>.json

``<cache>`` is ``$FIB_BASELINE_CACHE`` when set, else the kit's cache folder (``$FIB_CACHE_DIR``
or ``~/.cache/fib_core``), outside the fork. A file holds per workload uuid either
``{"latency_ms": x}`` or ``{"status": ..., "reason": ...}`` for a workload the baseline failed
(that workload then does not count, as in the contest).

A solution runs as the same user and could rewrite these files (a baseline latency of 1000 ms
makes every later score huge), so each file has an HMAC-SHA256 sidecar (``.sig``) made with the
kit's cache key (:func:`fib_core.bench.integrity.ensure_key`, hidden from solutions); a file
that does not verify is ignored and measured again. Without a key nothing is kept.

Example::

    from fib_core.baselines.cache import BaselineCache
    cache = BaselineCache.for_run(definition, baseline_name, code_hash, gpu, versions, settings)
    known = cache.load()                       # {uuid: {"latency_ms": 0.0123}, ...}
    cache.save({**known, uuid: {"latency_ms": 0.011}})
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fib_core.atomic import atomic_write_bytes, atomic_write_text
from fib_core.bench.integrity import ensure_key
from fib_core.paths import cache_dir

CACHE_ENV = "FIB_BASELINE_CACHE"
FORMAT = "fib-baseline-latencies"
VERSION = 1
# BenchmarkConfig fields a latency depends on (the tolerances decide verdicts, not times).
TIMING_FIELDS = ("warmup_runs", "iterations", "num_trials", "timing_method")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._") or "unknown"


def cache_root() -> Path:
    """Where baseline latencies are kept (``$FIB_BASELINE_CACHE``, else the kit's cache)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else cache_dir() / "baselines"


@dataclass(frozen=True)
class BaselineCache:
    """One cache file: the latencies of one baseline on one definition under one setup."""

    path: Path
    header: dict[str, Any]

    @classmethod
    def for_run(
        cls,
        definition: str,
        baseline: str,
        code_hash: str,
        gpu: str,
        versions: dict[str, str],
        settings: dict[str, Any],
    ) -> BaselineCache:
        timing = {name: settings.get(name) for name in TIMING_FIELDS}
        header = {
            "definition": definition,
            "baseline": baseline,
            "baseline_hash": code_hash,
            "gpu": gpu,
            "versions": dict(sorted(versions.items())),
            "timing": timing,
        }
        key = hashlib.sha256(
            json.dumps(header, sort_keys=True, default=str).encode("utf-8")
        ).hexdigest()[:12]
        libs = "-".join(f"{name}-{version}" for name, version in sorted(versions.items()))
        path = cache_root() / _slug(gpu) / _slug(libs) / f"{_slug(definition)}-{key}.json"
        return cls(path, header)

    @property
    def signature_path(self) -> Path:
        return self.path.with_name(self.path.name + ".sig")

    def load(self) -> dict[str, dict[str, Any]]:
        """The workloads measured so far ({} for a missing, unreadable or unsigned file:
        measure again)."""
        key = _key()
        try:
            raw = self.path.read_bytes()
            signature = self.signature_path.read_text(encoding="ascii").strip()
        except (OSError, ValueError):
            return {}
        if key is None or not hmac.compare_digest(signature, _sign(key, raw)):
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except ValueError:
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return {}
        if data.get("version") != VERSION or data.get("header") != self.header:
            return {}
        workloads = data.get("workloads")
        if not isinstance(workloads, dict):
            return {}
        return {uuid: entry for uuid, entry in workloads.items() if _valid(entry)}

    def save(self, workloads: dict[str, dict[str, Any]]) -> Path | None:
        """Write every workload's entry and its signature (each atomically); None when the
        kit has no cache key here (nothing is kept)."""
        key = _key()
        if key is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "version": VERSION, "header": self.header,
                "workloads": workloads}
        raw = (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8")
        atomic_write_bytes(self.path, raw)
        atomic_write_text(self.signature_path, _sign(key, raw) + "\n")
        return self.path


def _key() -> bytes | None:
    return ensure_key()


def _sign(key: bytes, raw: bytes) -> str:
    return hmac.new(key, raw, hashlib.sha256).hexdigest()


def _valid(entry: Any) -> bool:
    """A passed entry with a finite positive latency, or a failed one with its status."""
    if not isinstance(entry, dict):
        return False
    latency = entry.get("latency_ms")
    if latency is not None:
        return isinstance(latency, (int, float)) and 0 < latency < float("inf")
    return isinstance(entry.get("status"), str)
