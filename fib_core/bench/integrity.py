"""Cached references and latencies signed with a key solutions cannot read.

The reference cache lives under the user's cache folder, which a solution running as the same
user could rewrite (a cached reference latency of 1000 ms makes every later honest run report a
huge speedup). Each cached file gets an HMAC-SHA256 sidecar computed with a key kept in
``<cache>/keys/``: the judge process (kit code only) signs what it writes and loads only what
verifies, from the very bytes it verified. Workers never get the key: the engine hides the
``keys`` folder from them (an empty tmpfs over it) where the OS allows namespaces.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fib_core.atomic import atomic_write_bytes
from fib_core.bench.reference import ReferenceCache, write_cache_file
from fib_core.paths import cache_dir

log = logging.getLogger("fib_core.bench")
KEY_BYTES = 32


def key_dir(root: Path | None = None) -> Path:
    return (root if root is not None else cache_dir()) / "keys"


def ensure_key(root: Path | None = None) -> bytes | None:
    """The cache signing key, created (mode 0600) on first use; None if it cannot be kept."""
    path = key_dir(root) / "reference.key"
    try:
        data = path.read_bytes()
        if len(data) == KEY_BYTES:
            return data
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_bytes(path, secrets.token_bytes(KEY_BYTES), mode=0o600)
        return path.read_bytes()
    except OSError as err:
        log.warning(
            "cannot keep a signing key for the reference cache (%s); cached "
            "references will be recomputed each run",
            err,
        )
        return None


def _digest(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


class SignedReferenceCache(ReferenceCache):
    """A :class:`ReferenceCache` whose every file must carry a valid signature to be used."""

    def __init__(self, key: bytes | None, root: Path | None = None) -> None:
        super().__init__(root)
        self.key = key

    def _verified(self, path: Path) -> bytes | None:
        if self.key is None:
            return None
        try:
            data = path.read_bytes()
            sig = path.with_name(path.name + ".sig").read_text().strip()
        except OSError:
            return None
        if not hmac.compare_digest(sig, _digest(self.key, data)):
            log.warning(
                "reference cache %s fails its signature (changed outside the judge); recomputing",
                path,
            )
            return None
        return data

    def _sign(self, path: Path) -> None:
        if self.key is None:
            return
        try:
            data = path.read_bytes()
        except OSError:
            return
        sig = _digest(self.key, data)
        write_cache_file(path.with_name(path.name + ".sig"), lambda tmp: tmp.write_text(sig))

    def load_outputs(self, definition: Any, key: str, device: str) -> list | None:
        data = self._verified(self._path(definition, key, ".safetensors"))
        if data is None:
            return None
        from safetensors import safe_open  # noqa: F401 - same dependency as the parent class
        from safetensors.torch import load

        try:
            tensors = load(data)
            scalars = set(json.loads(_metadata(data).get("scalars", "[]")))
            return [
                tensors[n].item() if n in scalars else tensors[n].to(device)
                for n in definition.output_names
            ]
        except Exception as err:
            log.warning("signed reference cache entry unreadable (%s); recomputing", err)
            return None

    def store_outputs(self, definition: Any, key: str, outputs: Sequence) -> None:
        super().store_outputs(definition, key, outputs)
        self._sign(self._path(definition, key, ".safetensors"))

    def load_latency(self, definition: Any, key: str) -> dict | None:
        data = self._verified(self._path(definition, key, ".latency.json"))
        if data is None:
            return None
        try:
            record = json.loads(data)
            float(record["latency_ms"])
            return record if isinstance(record.get("extra"), dict) else None
        except (ValueError, KeyError, TypeError):
            return None

    def store_latency(self, definition: Any, key: str, record: dict) -> None:
        super().store_latency(definition, key, record)
        self._sign(self._path(definition, key, ".latency.json"))


def _metadata(data: bytes) -> dict:
    """The ``__metadata__`` of a safetensors file held in memory."""
    import struct

    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.get("__metadata__") or {}
    return meta if isinstance(meta, dict) else {}
