"""Where each tile of a grouped GEMM lives, computed on the device from the experts' counts.

Both GEMMs use the same row layout: expert e owns ceil(count_e / BLOCK_M) blocks of BLOCK_M
rows, laid out expert after expert ("padded rows"). GEMM1 writes h there, GEMM2 reads it and
writes its weighted output there, and the combine step finds a pair's row from its rank.

Tiles are numbered expert-major, then by N tile, then by M block: programs that run at the same
time work on the same expert, so that expert's weight tile is fetched from HBM once and served
to its other M blocks from L2, while the expert's activations stay in L2 across N tiles.
The grid is persistent (grid-stride loops over the tile count read from the device), which
is what lets the launch size be fixed on the host without knowing the counts.

Data one phase of the one-launch kernel reads was written by other programs of the same launch,
after a grid barrier: such loads take ``cache_modifier=".cg"`` (L2, never a stale L1 line).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def expert_table(counts_ptr, E_LOCAL: tl.constexpr, E_PAD: tl.constexpr,
                 BLOCK_M: tl.constexpr, n_tiles):
    """Per-expert counts, M blocks, and the inclusive ends of the tile and block ranges."""
    experts = tl.arange(0, E_PAD)
    counts = tl.load(counts_ptr + experts, mask=experts < E_LOCAL, other=0, cache_modifier=".cg")
    blocks = (counts + BLOCK_M - 1) // BLOCK_M
    tile_end = tl.cumsum(blocks * n_tiles, axis=0)
    block_end = tl.cumsum(blocks, axis=0)
    return experts, counts, blocks, tile_end, block_end


@triton.jit
def locate_tile(t, experts, counts, blocks, tile_end, block_end, n_tiles):
    """Tile number t -> (expert, its row count, its first padded block, M block, N tile)."""
    expert = tl.sum((tile_end <= t).to(tl.int32), axis=0)
    here = experts == expert
    n_blocks = tl.sum(tl.where(here, blocks, 0), axis=0)
    first_tile = tl.sum(tl.where(here, tile_end, 0), axis=0) - n_blocks * n_tiles
    first_block = tl.sum(tl.where(here, block_end, 0), axis=0) - n_blocks
    count = tl.sum(tl.where(here, counts, 0), axis=0)
    local = t - first_tile
    return expert, count, first_block, local % n_blocks, local // n_blocks


@triton.jit
def grid_barrier(sync_ptr, num_programs):
    """Wait until every program of the launch has arrived; their earlier stores are then visible.

    One int32 counter per barrier, zero between calls: arrivals count it up to ``num_programs``,
    departures on to twice that, and the last program to leave sets it back to 0 (the next call
    cannot start before this one ends). Safe only in a cooperative launch, where all programs
    are resident at once, so a waiting program never keeps another from starting.
    """
    tl.debug_barrier()  # every thread of this program has issued its stores
    arrived = tl.atomic_add(sync_ptr, 1, sem="acq_rel") + 1
    while arrived < num_programs:
        arrived = tl.atomic_add(sync_ptr, 0, sem="acquire")
    tl.debug_barrier()
    left = tl.atomic_add(sync_ptr, 1, sem="acq_rel") + 1
    if left == 2 * num_programs:
        tl.atomic_xchg(sync_ptr, 0)


@triton.jit
def round_to_e4m3(x):
    """Round float32 values to the 3 mantissa bits of e4m3 (nearest, ties to even).

    The cast to float8 afterwards is then exact. On the GPU this costs a few integer ops in
    an epilogue; it exists because Triton's CPU interpreter drops the exponent carry when a
    cast rounds up across a power of two (7.94 -> 4.0), which would fail the CPU tests.
    """
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576  # -1048576 == ~0xFFFFF
    return bits.to(tl.float32, bitcast=True)


def block_bound(num_tokens: int, num_local: int, top_k: int, block_m: int) -> int:
    """Upper bound of the padded M blocks, from sizes only (no host sync).

    A token picks each expert at most once, so the pairs are at most T * min(top_k, E), and
    padding adds less than one block per non-empty expert (at most min(E, pairs) of them).
    """
    pairs = num_tokens * min(top_k, num_local)
    by_pairs = (pairs + min(num_local, pairs) * (block_m - 1)) // block_m
    by_experts = num_local * triton.cdiv(num_tokens, block_m)
    return max(1, min(by_pairs, by_experts))
