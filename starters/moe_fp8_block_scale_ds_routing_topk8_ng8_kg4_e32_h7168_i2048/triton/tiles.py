"""Tile sizes and launch widths of the MoE kernels, chosen from the token count alone.

Why the token count: with 32 local experts and 8 of 256 experts per token, a local expert sees
about T/32 tokens. Small T is bound by reading the chosen experts' FP8 weights, so tiles are
thin in M (16 rows, the smallest tensor-core tile) and narrow in N, which spreads one expert's
weights over many programs and keeps every SM streaming. Large T is bound by the matmuls, so
tiles grow to 128 x 128 and weights are reused across the M blocks of an expert through L2.

Nothing here reads device memory: the choice must not need a host sync.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

SCALE_BLOCK = 128  # the definition's quantisation block (weights: 128 x 128, tokens: 1 x 128)


@dataclass(frozen=True)
class TileConfig:
    """Block sizes and launch shape of the two grouped GEMMs.

    block_m: token rows per tile (both GEMMs; also the padding of each expert's row range).
    block_h: intermediate columns per GEMM1 tile. It is also the width of the per-token
        quantisation blocks of the intermediate activation h, hence GEMM2's K step.
    block_n2: hidden columns per GEMM2 tile.
    programs_per_sm: persistent programs launched per SM (the grids are grid-stride loops).
    """

    block_m: int
    block_h: int
    block_n2: int
    warps1: int = 4
    stages1: int = 4
    warps2: int = 4
    stages2: int = 4
    programs_per_sm: int = 2

    def __post_init__(self) -> None:
        if self.block_m < 16 or self.block_m & (self.block_m - 1):
            raise ValueError(f"block_m={self.block_m}: must be a power of two >= 16")
        for name in ("block_h", "block_n2"):
            value = getattr(self, name)
            if value < 16 or value > SCALE_BLOCK or SCALE_BLOCK % value:
                raise ValueError(f"{name}={value}: must divide {SCALE_BLOCK} and be >= 16")
        if self.programs_per_sm < 1:
            raise ValueError(f"programs_per_sm={self.programs_per_sm}: must be >= 1")

    def check_sizes(self, hidden: int, inter: int) -> None:
        """Raise when the problem sizes do not split into this config's tiles."""
        if hidden % SCALE_BLOCK or inter % SCALE_BLOCK:
            raise ValueError(
                f"hidden={hidden}, intermediate={inter}: both must be multiples of {SCALE_BLOCK}"
            )
        if hidden % self.block_n2 or inter % self.block_h:
            raise ValueError(f"hidden={hidden}, intermediate={inter}: do not fit tiles {self}")


def pick_config(num_tokens: int) -> TileConfig:
    """The tile config for a call with ``num_tokens`` tokens (see the module docstring).

    Chosen by a sweep on an H200 (benchmarks/bench_moe.py --sweep): up to a few hundred tokens,
    16-row tiles with 64-wide N tiles beat 32-wide ones (more programs did not stream faster);
    around a thousand tokens 32-row tiles win; from a few thousand, 128 x 128 tiles with 8 warps.
    """
    if num_tokens <= 256:  # weight-bound: a few rows per expert
        return TileConfig(block_m=16, block_h=64, block_n2=64, programs_per_sm=4)
    if num_tokens <= 2048:  # tens of rows per expert
        return TileConfig(block_m=32, block_h=128, block_n2=128, stages1=3, stages2=4)
    return TileConfig(  # hundreds of rows per expert: matmul-bound
        block_m=128, block_h=128, block_n2=128, warps1=8, stages1=3, warps2=8, stages2=4,
        programs_per_sm=1,
    )


@lru_cache(maxsize=8)
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def num_programs(device: torch.device, config: TileConfig, tile_bound: int) -> int:
    """Persistent grid size: enough programs to fill the GPU, never more than there are tiles.

    On the CPU (Triton's interpreter) programs run one after another, so a few suffice.
    """
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        wanted = _sm_count(index) * config.programs_per_sm
    else:
        wanted = 4
    return max(1, min(wanted, tile_bound))
