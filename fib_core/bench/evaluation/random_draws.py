"""Seeded random tensors and scalars: the random inputs of a workload's input set.

One ``torch.Generator`` per (seed, workload uuid, input set) drives all random numbers
(:func:`make_generator`), so every input set is reproducible from the seed in the trace.
Tensors are generated in chunks directly on the target device, into their final buffer, so a
1.4 GB fp8 weight never needs a multi-GB fp32 temporary. :mod:`.inputs` puts these beside a
workload's scalars, blobs and structured generators' inputs.

Example::

    gen = make_generator(seed=0, uuid=workload.uuid, device="cuda")
    x = random_tensor((4096, 7168), "float8_e4m3fn", gen, "cuda")
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# Elements generated per step: 16 Mi floats = 64 MiB of fp32 scratch at most.
CHUNK_ELEMENTS = 1 << 24
# The organizers' integer range; narrower integer types are clipped to their own range.
INT_LOW, INT_HIGH = -1024, 1024


def derive_seed(seed: int, uuid: str, input_set: int = 0) -> int:
    """A 63-bit seed from (seed, workload uuid, input set): distinct and stable per workload."""
    digest = hashlib.sha256(f"fib-inputs|{seed}|{uuid}|{input_set}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def make_generator(seed: int, uuid: str, device: str, input_set: int = 0) -> torch.Generator:
    """The one generator that produces every random number of this workload's input set."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(derive_seed(seed, uuid, input_set))
    return gen


def random_tensor(
    shape: tuple[int, ...], dtype_name: str, gen: torch.Generator, device: str
) -> torch.Tensor:
    """A tensor of random values like the organizers' (floats N(0,1), ints in [-1024, 1024)),
    written chunk by chunk into its final buffer; fp8 values are clamped to their range."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.data.dtypes loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.dtypes import torch_dtype

    dtype = torch_dtype(dtype_name)
    out = torch.empty(shape, dtype=dtype, device=device)
    flat = out.view(-1) if out.dim() > 0 else out.view(1)
    total = flat.numel()
    for start in range(0, total, CHUNK_ELEMENTS):
        n = min(CHUNK_ELEMENTS, total - start)
        flat[start : start + n].copy_(_random_chunk(n, dtype_name, dtype, gen, device))
    return out


def _random_chunk(n: int, dtype_name: str, dtype: Any, gen: Any, device: str) -> Any:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if dtype_name == "bool":
        return torch.randint(0, 2, (n,), generator=gen, device=device, dtype=torch.int8).bool()
    if dtype_name.startswith("int"):
        info = torch.iinfo(dtype)
        low, high = max(INT_LOW, info.min), min(INT_HIGH, info.max + 1)
        return torch.randint(low, high, (n,), generator=gen, device=device, dtype=dtype)
    if dtype_name == "float4_e2m1":  # packed pairs: any byte is a valid pair of fp4 values
        raw = torch.randint(0, 256, (n,), generator=gen, device=device, dtype=torch.uint8)
        return raw.view(dtype)
    values = torch.randn(n, generator=gen, device=device, dtype=torch.float32)
    if dtype_name.startswith("float8"):
        limit = torch.finfo(dtype).max
        values.clamp_(-limit, limit)
    return values


def random_scalar(dtype_name: str, gen: torch.Generator) -> int | float | bool:
    """A Python number for a random scalar input (shape null), drawn from the same generator."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    device = gen.device
    if dtype_name == "bool":
        return bool(torch.randint(0, 2, (1,), generator=gen, device=device).item())
    if dtype_name.startswith("int"):
        return int(torch.randint(1, 64, (1,), generator=gen, device=device).item())
    return float(torch.randn(1, generator=gen, device=device).item())
