"""The framing between the engine and its child processes, safe to read from hostile code.

A worker runs untrusted solution code, so nothing it sends may be unpickled, trusted for its
size, or waited on without a deadline. Every message a child sends is one frame::

    magic (4 bytes) | JSON length (u32) | blob length (u64) | JSON header | raw blob

The reader checks the magic, caps both lengths before allocating anything, reads with a
deadline (a partial frame cannot block the parent forever) and parses the header as strict JSON
into a dict. Anything else raises :class:`WireError`, which the caller turns into a
RUNTIME_ERROR of the solution that was running. Tensors travel as raw bytes described in the
header (dtype name from an allow-list, shape, byte count), never as Python objects.

The parent's own messages to a child go the other way with pickle in the same framing (the
pickled part's length in the first field, an optional raw blob after it): a child trusts its
parent, never the reverse.

Output tensors are tens of megabytes (a GDN state at batch 64 is 33 MB). On Linux they do not
cross the sockets at all: the worker writes them into a slot of a shared buffer and the check
frame only names the slot (:mod:`fib_core.bench.evaluation.exchange`). Where they do travel as bytes, no
side copies them more than it must: the worker sends each tensor's host copy as it is (no
concatenation), readers receive into one preallocated buffer, and the judge builds its tensors
as views of that buffer before moving them to its device.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from fib_core.data.dtypes import TORCH_ELEMENT_BYTES

MAGIC = b"FIB1"
_PREFIX = struct.Struct("<4sIQ")
MAX_HEADER_BYTES = 4 << 20  # results carry logs and extras; both are clipped before sending
DEFAULT_MAX_BLOB = 1 << 30  # outputs whose size the definition does not pin down
# The dtypes a tensor on the wire may have (torch's names), with their element sizes.
ITEMSIZE = TORCH_ELEMENT_BYTES


class WireError(Exception):
    """A child sent something that is not a well-formed frame within the limits."""


class ChildGone(Exception):
    """The child closed its end (exited or crashed)."""


# --- writing (both sides) ---------------------------------------------------------------------


Blob = bytes | bytearray | memoryview


def _size(blob: Blob | Sequence[Blob]) -> int:
    if isinstance(blob, (bytes, bytearray, memoryview)):
        return memoryview(blob).nbytes
    return sum(memoryview(part).nbytes for part in blob)


def _send_blob(sock: socket.socket, blob: Blob | Sequence[Blob]) -> None:
    parts = [blob] if isinstance(blob, (bytes, bytearray, memoryview)) else blob
    for part in parts:
        if memoryview(part).nbytes:
            sock.sendall(part)


def send_frame(
    sock: socket.socket, header: dict, blob: Blob | Sequence[Blob] = b""
) -> None:
    """One frame: ``header`` as JSON (strict: no NaN) and an optional raw blob, given whole or
    as parts sent one after the other (never joined into one copy)."""
    text = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    sock.sendall(_PREFIX.pack(MAGIC, len(text), _size(blob)) + text)
    _send_blob(sock, blob)


def send_object(
    sock: socket.socket, obj: Any, blob: Blob | Sequence[Blob] = b"", fds: Sequence[int] = ()
) -> None:
    """Parent -> child only: a pickled object in a frame (the child trusts its parent), an
    optional raw blob after it (outputs relayed to the judge: not pickled, not copied), and
    optional file descriptors passed with the frame's first bytes (the shared output buffer,
    :mod:`fib_core.bench.evaluation.exchange`)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    head = _PREFIX.pack(MAGIC, len(data), _size(blob)) + data
    if fds:
        sent = socket.send_fds(sock, [head], list(fds))
        if sent < len(head):
            sock.sendall(memoryview(head)[sent:])
    else:
        sock.sendall(head)
    _send_blob(sock, blob)


def recv_object(sock: socket.socket) -> Any:
    """Child side of :func:`send_object` (blocking); a blob, if any, is dropped."""
    return recv_message(sock)[0]


def recv_message(sock: socket.socket) -> tuple[Any, bytearray]:
    """Child side of :func:`send_object`: (object, blob), blob empty when none was sent; a
    descriptor sent with it is closed (see :func:`recv_message_fds`)."""
    obj, blob, fds = recv_message_fds(sock)
    for fd in fds:
        os.close(fd)
    return obj, blob


def recv_message_fds(sock: socket.socket) -> tuple[Any, bytearray, list[int]]:
    """Child side of :func:`send_object`: (object, blob, descriptors passed with it)."""
    first, fds, _, _ = socket.recv_fds(sock, _PREFIX.size, 4)
    if not first:
        for fd in fds:
            os.close(fd)
        raise ChildGone("connection closed")
    prefix = bytes(first) + (
        bytes(_recv_exact(sock, _PREFIX.size - len(first))) if len(first) < _PREFIX.size else b""
    )
    magic, n, size = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise WireError("bad frame from the parent")
    obj = pickle.loads(_recv_exact(sock, n))
    return obj, _recv_exact(sock, size) if size else bytearray(), list(fds)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        count = sock.recv_into(view[got:], min(n - got, 1 << 22))
        if not count:
            raise ChildGone("connection closed")
        got += count
    return buf


# --- reading what a child sent (parent side, hostile input) ----------------------------------


def read_frame(
    sock: socket.socket, deadline: float, *, max_blob: int = 0, alive: Any = None
) -> tuple[dict, bytearray] | None:
    """The next frame as (header dict, blob), or None at ``deadline`` with nothing started.

    A frame that has started must finish before the deadline too (else WireError: a child
    that sends half a frame and stops is treated as sending garbage). ``alive()`` is polled
    so that a dead child raises ChildGone promptly.
    """
    if not _wait_readable(sock, deadline, alive):
        return None
    prefix = _read_exact(sock, _PREFIX.size, deadline)
    magic, header_len, blob_len = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise WireError(f"malformed message (bad magic {magic!r})")
    if header_len > MAX_HEADER_BYTES:
        raise WireError(f"message header of {header_len} bytes exceeds {MAX_HEADER_BYTES}")
    if blob_len > max_blob:
        raise WireError(f"message payload of {blob_len} bytes exceeds the {max_blob} allowed")
    raw = _read_exact(sock, header_len, deadline)
    blob = _read_exact(sock, blob_len, deadline) if blob_len else bytearray()
    try:
        header = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as err:
        raise WireError(f"malformed message header ({err})") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise WireError("malformed message header (not an object with a 'type')")
    return header, blob


def _reject_constant(token: str) -> Any:
    raise ValueError(f"non-standard JSON constant {token}")


def _wait_readable(sock: socket.socket, deadline: float, alive: Any) -> bool:
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([sock], [], [], min(remaining, 0.5))
        if ready:
            return True
        if alive is not None and not alive():
            # One last look: the child may have written its last frame before exiting.
            ready, _, _ = select.select([sock], [], [], 0)
            if ready:
                return True
            raise ChildGone("the process ended")


def _read_exact(sock: socket.socket, n: int, deadline: float) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WireError(f"incomplete message ({got} of {n} bytes before the deadline)")
        ready, _, _ = select.select([sock], [], [], min(remaining, 0.5))
        if not ready:
            continue
        count = sock.recv_into(view[got:], min(n - got, 1 << 22))
        if count == 0:
            if got == 0 and n == _PREFIX.size:
                raise ChildGone("connection closed")
            raise WireError(f"incomplete message ({got} of {n} bytes, then the end)")
        got += count
    return buf


# --- tensors as bytes --------------------------------------------------------------------------


def encode_values(
    values: Sequence[Any], into: memoryview | None = None
) -> tuple[list[dict], list[memoryview]]:
    """Outputs as (descriptions, blob parts): tensors by dtype/shape/bytes (each part one
    tensor's host copy, for :func:`send_frame`), numbers by value. With ``into`` (a slot of
    the shared output buffer) the tensors are copied there one after the other instead, from
    wherever they are (a device copy goes straight into it), and no parts are returned.

    Raises TypeError for anything else (the caller reports it as the solution's failure), and
    ValueError when the tensors do not fit ``into``.
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    specs: list[dict] = []
    chunks: list[memoryview] = []
    offset = 0
    for value in values:
        if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
            # A subclass could compute its bytes when read, after the timed call returned.
            raise TypeError(
                f"an output of type {type(value).__name__} cannot be checked (return a plain "
                "torch.Tensor)"
            )
        if isinstance(value, torch.Tensor):
            name = str(value.dtype).removeprefix("torch.")
            if name not in ITEMSIZE:
                raise TypeError(f"an output of dtype {value.dtype} cannot be checked")
            flat = value.detach().contiguous().reshape(-1)
            nbytes = flat.numel() * flat.element_size()
            specs.append(
                {"kind": "tensor", "dtype": name, "shape": list(value.shape), "nbytes": nbytes}
            )
            if not nbytes:
                continue
            if into is not None:
                if offset + nbytes > into.nbytes:
                    raise ValueError("the outputs do not fit the shared output buffer")
                target = torch.frombuffer(into, dtype=torch.uint8, count=nbytes, offset=offset)
                target.copy_(flat.view(torch.uint8))
                offset += nbytes
            else:
                chunks.append(memoryview(flat.view(torch.uint8).cpu().numpy()))
        elif isinstance(value, bool) or value is None:
            specs.append({"kind": "value", "value": value})
        elif isinstance(value, (int, float)):
            number = float(value) if isinstance(value, float) else int(value)
            if isinstance(number, float) and not math.isfinite(number):
                specs.append({"kind": "float", "text": str(number)})
            else:
                specs.append({"kind": "value", "value": number})
        else:
            raise TypeError(f"an output of type {type(value).__name__} cannot be checked")
    return specs, chunks


def validate_values(
    specs: Any, blob_len: int | None, max_items: int, capacity: int = 0
) -> list[dict]:
    """Check descriptions from a child before anything is built from them: their bytes add
    up to ``blob_len``, or (``blob_len`` None: a slot of the shared output buffer) to at most
    ``capacity``."""
    if not isinstance(specs, list) or len(specs) > max_items:
        raise WireError("malformed outputs (not a list of the definition's size)")
    total = 0
    for spec in specs:
        if not isinstance(spec, dict):
            raise WireError("malformed outputs (an entry is not an object)")
        kind = spec.get("kind")
        if kind == "tensor":
            shape, dtype, nbytes = spec.get("shape"), spec.get("dtype"), spec.get("nbytes")
            if (
                dtype not in ITEMSIZE
                or not isinstance(shape, list)
                or len(shape) > 16
                or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d for d in shape)
            ):
                raise WireError("malformed outputs (bad tensor dtype or shape)")
            if nbytes != math.prod(shape) * ITEMSIZE[dtype]:
                raise WireError("malformed outputs (byte count does not match shape and dtype)")
            total += nbytes
        elif kind == "value":
            if not isinstance(spec.get("value"), (int, float, bool, type(None))):
                raise WireError("malformed outputs (a scalar is not a number)")
        elif kind == "float":
            if spec.get("text") not in ("nan", "inf", "-inf"):
                raise WireError("malformed outputs (bad non-finite scalar)")
        else:
            raise WireError(f"malformed outputs (unknown kind {kind!r})")
    if blob_len is None:
        if total > capacity:
            raise WireError("malformed outputs (larger than the shared output buffer's slot)")
    elif total != blob_len:
        raise WireError("malformed outputs (payload size does not match the descriptions)")
    return specs


def payload_bytes(specs: list[dict]) -> int:
    """Bytes of the tensors validated descriptions announce."""
    return sum(spec["nbytes"] for spec in specs if spec["kind"] == "tensor")


def decode_values(specs: list[dict], blob: Blob, device: str) -> list[Any]:
    """Inverse of :func:`encode_values` (specs already validated): fresh tensors on ``device``.

    The tensors are always the caller's own: copies on a GPU (the host buffer is only read);
    on the CPU views of ``blob`` when it is a received bytearray, copies when it is a region
    of the shared output buffer (which the worker could still write)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    shared = isinstance(blob, memoryview) and not blob.readonly
    if not isinstance(blob, bytearray) and not shared:
        blob = bytearray(blob)
    values: list[Any] = []
    offset = 0
    for spec in specs:
        if spec["kind"] == "tensor":
            n = spec["nbytes"]
            raw = (
                torch.frombuffer(blob, dtype=torch.uint8, count=n, offset=offset)
                if n
                else torch.empty(0, dtype=torch.uint8)
            )
            offset += n
            dtype = getattr(torch, spec["dtype"])
            tensor = raw.view(dtype).reshape(spec["shape"])
            copy = shared and torch.device(device).type == "cpu"
            values.append(tensor.clone() if copy else tensor.to(device))
        elif spec["kind"] == "float":
            values.append(float(spec["text"]))
        else:
            values.append(spec["value"])
    return values


def socket_from_fd(fd: int) -> socket.socket:
    """The child's end of the connection its parent passed as a file descriptor."""
    return socket.socket(fileno=fd)
