"""DSA top-k indexer (DeepSeek-V3.2): score every cached token of a request, keep the best 2048.

For request b and each of its first ``seq_lens[b]`` tokens t (reached through ``block_table``):

    key_t   = fp8 values of t * the token's fp32 scale
    score_t = sum over heads h of relu(q[b, h] . key_t) * weights[b, h]

and ``topk_indices[b]`` holds the min(topk, seq_len) best tokens as global ids
(``page * page_size + slot``), -1 in the remaining slots. The order of the chosen ids is not
part of the contract (the checker compares the sets' scores), so the kernel does not sort.

Cache page layout (DeepGEMM's packed FP8 format): a page is ``page_size * (D + 4)`` bytes, the
first ``page_size * D`` are the FP8 (e4m3) keys token-major, then ``page_size`` fp32 scales.
The kernel reads the int8 tensor as raw bytes and reinterprets the two parts in place.

One launch, no host syncs and no host loop over requests: a few programs per request each score
every n-th page of it, and the request's last program to finish selects.

1. Scoring: a [page_size x D] FP8 tile times the request's [H x D] FP8 queries on the tensor
   cores (widened to bf16 for fp32 accumulation, see ``operands``), scaled, relu'd, weighted
   and summed over heads. Pages past the request's length only check in. This streams the
   cache: it is where the bytes are read.
2. Selection, by the program that brings the request's arrival counter to its program count
   (the counter goes back to 0 for the next call). The scores are mapped to integers with the
   same order; a bisection between the smallest and the largest key finds the k-th largest,
   one block-wide count per step, and stops at the first probe that counts exactly k (about
   log2(seq_len) + 2 steps for distinct scores; a request with at most topk tokens skips it).
   The chosen positions are compacted by prefix sums over rows of ``compact_cols`` positions
   (ties at the threshold, rare, are broken by position). No sort.

Where the time goes (H100, the kit's judge-span timer, the 128 contest shapes with random
lengths, ``benchmarks/bench_dsa.py`` inputs): 14.4 us mean. Scoring alone is 8.2 us of it;
the selection the rest, about 19 us of the 37 us for 30 requests of up to 5824 tokens.
Measured steps: a fixed 32-step bisection gave 18.8 us; stopping early 16.6; skipping the tie
scan when the probe is exact 15.4; row-wise compaction (128 columns) 14.4. Tried and slower: three probes
per count (16.5), 8 warps (19.8), 3 pipeline stages (15.7). Next to try: a selection that
narrows to the few candidates near the threshold after a few steps and finishes on them, and
fewer, longer programs per request for the short ones (1 page takes 5.4 us, mostly latency).

Why one launch: the judge times a call from its first kernel's start to its last one's end, so
with two kernels the host's time to launch the second (longer than the scoring itself on most
workloads) is counted while the GPU waits.

Head count, head size and page size come from the tensor shapes.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

# Tensor-core operand type of the scores. FP8 values are exact in bf16 and fp32, so the products
# are the same; the accumulation is not: Hopper's FP8 tensor cores keep fewer accumulator bits
# than fp32, enough to swap near-tied tokens at the top-k boundary (seen through the kit: 1 of
# 128 workloads failed on one of its timing input sets). bf16 accumulates in fp32
# (benchmarks/stress_dsa_indexer.py measures both). Triton's CPU interpreter multiplies
# 8/16-bit float tensors wrongly in tl.dot, so under the interpreter the operands are fp32.
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_OPERANDS = {"fp8": 0, "bf16": 1, "fp32": 2}

# The selection keeps a request's whole score row in one program's registers.
MAX_TOKENS_PER_REQUEST = 65536


@triton.jit
def _score_pages(
    split, num_splits, b, seq_len, q_ptr, cache_ptr, w_ptr, block_table_ptr, scores_ptr,
    num_heads, s_q_b, s_q_h, s_w_b, s_bt_b, s_sc_b,
    PAGE: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, OPERANDS: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Scores of pages split, split + num_splits, ... of request b, written to its score row.
    Pages past the request's length are never read (block_table may hold junk there)."""
    offs_t = tl.arange(0, PAGE)
    offs_d = tl.arange(0, D)
    offs_h = tl.arange(0, BLOCK_H)
    h_mask = offs_h < num_heads
    # The request's queries, all heads, [BLOCK_H, D] FP8, and head weights: loaded once.
    q = tl.load(q_ptr + b * s_q_b + offs_h[:, None] * s_q_h + offs_d[None, :],
                mask=h_mask[:, None], other=0.0)
    w = tl.load(w_ptr + b * s_w_b + offs_h, mask=h_mask, other=0.0)
    # STAGES > 1: Triton issues the next pages' loads while this one multiplies, which is what
    # keeps a few programs per SM streaming.
    for page_idx in tl.range(split, tl.cdiv(seq_len, PAGE), num_splits, num_stages=STAGES):
        page = tl.load(block_table_ptr + b * s_bt_b + page_idx).to(tl.int64)
        page_base = cache_ptr + page * (PAGE * (D + 4))  # int8 byte pointer to the page

        # The page's keys: PAGE x D bytes, reinterpreted as FP8 e4m3. Then PAGE fp32 scales.
        k_bytes = tl.load(page_base + offs_t[:, None] * D + offs_d[None, :])
        k = k_bytes.to(tl.float8e4nv, bitcast=True)
        scale_ptr = (page_base + PAGE * D).to(tl.pointer_type(tl.float32), bitcast=True)
        scale = tl.load(scale_ptr + offs_t)

        # [PAGE, BLOCK_H] = keys x queries^T. FP8 values are exact in the wider types, so
        # OPERANDS changes speed and the accumulator's precision, not the products.
        if OPERANDS == 2:
            logits = tl.dot(k.to(tl.float32), tl.trans(q.to(tl.float32)))
        elif OPERANDS == 1:
            logits = tl.dot(k.to(tl.bfloat16), tl.trans(q.to(tl.bfloat16)))
        else:
            logits = tl.dot(k, tl.trans(q))
        # Scale before relu, exactly as key = fp8 * scale (a scale could be negative).
        logits = logits * scale[:, None]
        score = tl.sum(tl.maximum(logits, 0.0) * w[None, :], axis=1)  # [PAGE]

        pos = page_idx * PAGE + offs_t
        tl.store(scores_ptr + b * s_sc_b + pos, score, mask=pos < seq_len)


@triton.jit
def _min_max(a_min, a_max, b_min, b_max):
    return tl.minimum(a_min, b_min), tl.maximum(a_max, b_max)


@triton.jit
def _select(
    b, seq_len, scores_ptr, block_table_ptr, out_ptr,
    topk, s_sc_b, s_bt_b, s_o_b,
    PAGE: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_TOPK: tl.constexpr,
    COMPACT_COLS: tl.constexpr,
):
    """Write the ids of the min(topk, seq_len) best scores of request b, then -1 padding.
    The scores were written by other programs: ``.cg`` loads read them from L2, past an L1
    that could hold older lines."""
    k = tl.minimum(seq_len, topk)

    offs = tl.arange(0, BLOCK_L)
    valid = offs < seq_len
    x = tl.load(scores_ptr + b * s_sc_b + offs, mask=valid, other=0.0, cache_modifier=".cg")

    # Order-preserving map float32 -> int32: negative floats have their magnitude bits flipped.
    bits = x.to(tl.int32, bitcast=True)
    key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    key = tl.where(valid, key, -2147483648)

    # The threshold thr: the largest value with count(key >= thr) >= k, by bisection between
    # the smallest and the largest key. Invariant: count(key >= lo) = n_lo >= k and
    # count(key > hi) < k. A probe that counts exactly k keys at or above it is a threshold
    # too, so the search stops there: distinct scores take about log2(seq_len) + 2 steps
    # instead of the 32 a fixed search needs; only a tie at the k-th place takes them all.
    # Invalid slots hold the minimum key and every probe is above lo: they never count. A
    # request with at most topk tokens keeps them all (no steps).
    lo = tl.full([], -2147483648, tl.int64)
    hi = lo
    n_lo = seq_len
    if seq_len > topk:
        smallest, largest = tl.reduce((tl.where(valid, key, 2147483647), key), 0, _min_max)
        lo = smallest.to(tl.int64)
        hi = largest.to(tl.int64)
    while lo < hi:
        mid = (lo + hi + 1) >> 1  # floor, also for negatives
        cnt = tl.sum((key >= mid.to(tl.int32)).to(tl.int32), axis=0)
        take = cnt >= k
        lo = tl.where(take, mid, lo)
        n_lo = tl.where(take, cnt, n_lo)
        hi = tl.where(cnt == k, mid, tl.where(take, hi, mid - 1))
    thr = lo.to(tl.int32)

    if n_lo == k:  # exactly k keys at or above thr: no tie to break (the common case)
        chosen = valid & (key >= thr)
    else:
        # Everything above thr is in; ties at it are taken by position until k are in.
        above = valid & (key > thr)
        tied = valid & (key == thr)
        need = k - tl.sum(above.to(tl.int32), axis=0)
        chosen = above | (tied & (tl.cumsum(tied.to(tl.int32), axis=0) <= need))

    # Compact: the i-th chosen position goes to slot i. Positions become global token ids.
    if COMPACT_COLS == 0:
        slot = tl.cumsum(chosen.to(tl.int32), axis=0) - 1
    else:
        # Rows of COMPACT_COLS positions: a short scan of the row totals, then one within
        # each row, instead of one scan of the whole block.
        c2 = tl.reshape(chosen.to(tl.int32), (BLOCK_L // COMPACT_COLS, COMPACT_COLS))
        row_total = tl.sum(c2, axis=1)
        row_start = tl.cumsum(row_total, axis=0) - row_total
        slot = tl.reshape(row_start[:, None] + tl.cumsum(c2, axis=1), (BLOCK_L,)) - 1
    page = tl.load(block_table_ptr + b * s_bt_b + offs // PAGE, mask=chosen, other=0)
    ids = page * PAGE + offs % PAGE
    tl.store(out_ptr + b * s_o_b + slot, ids, mask=chosen)

    offs_k = tl.arange(0, BLOCK_TOPK)
    pad = (offs_k >= k) & (offs_k < topk)
    tl.store(out_ptr + b * s_o_b + offs_k, tl.full([BLOCK_TOPK], -1, tl.int32), mask=pad)


@triton.jit
def _indexer_kernel(
    q_ptr, cache_ptr, w_ptr, seq_lens_ptr, block_table_ptr, scores_ptr, out_ptr, arrivals_ptr,
    num_heads, topk, s_q_b, s_q_h, s_w_b, s_bt_b, s_sc_b, s_o_b,
    PAGE: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, OPERANDS: tl.constexpr,
    BLOCK_L: tl.constexpr, BLOCK_TOPK: tl.constexpr, COMPACT_COLS: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Program (split, request): score every num_splits-th page of the request; the request's
    last program to finish also selects."""
    split = tl.program_id(0)
    b = tl.program_id(1)
    num_splits = tl.num_programs(0)
    seq_len = tl.load(seq_lens_ptr + b)
    _score_pages(split, num_splits, b, seq_len, q_ptr, cache_ptr, w_ptr, block_table_ptr,
                 scores_ptr, num_heads, s_q_b, s_q_h, s_w_b, s_bt_b, s_sc_b,
                 PAGE, D, BLOCK_H, OPERANDS, STAGES)
    # Check in: every thread's stores are issued (barrier), then one acq_rel atomic publishes
    # them. The program that brings the count to num_splits saw every other program's scores.
    tl.debug_barrier()
    arrived = tl.atomic_add(arrivals_ptr + b, 1, sem="acq_rel") + 1
    if arrived == num_splits:
        tl.atomic_xchg(arrivals_ptr + b, 0)  # ready for the next call
        _select(b, seq_len, scores_ptr, block_table_ptr, out_ptr, topk, s_sc_b, s_bt_b, s_o_b,
                PAGE, BLOCK_L, BLOCK_TOPK, COMPACT_COLS)


_ARRIVALS: dict[torch.device, torch.Tensor] = {}


def _arrival_counters(device: torch.device, batch: int) -> torch.Tensor:
    """One int32 arrival counter per request, allocated zeroed once (grown when a larger batch
    comes) and left at zero by every call, so no call pays for zeroing them."""
    counters = _ARRIVALS.get(device)
    if counters is None or counters.numel() < batch:
        counters = _ARRIVALS[device] = torch.zeros(max(batch, 64), dtype=torch.int32,
                                                   device=device)
    return counters


@functools.lru_cache(maxsize=8)
def _sm_count(device: torch.device) -> int:
    """Multiprocessor count, queried once per device (the query is not free)."""
    if device.type != "cuda":
        return 2  # interpreter: few, large programs run fastest
    return torch.cuda.get_device_properties(device).multi_processor_count


def plan_splits(batch: int, max_pages: int, sm_count: int) -> int:
    """Programs per request: up to eight per SM over the whole batch, at most one per page.
    On an H200 (judge's timer) 30 requests of up to 91 pages took 49 us with 36 programs each
    against 58 us with 9; fewer requests were fastest with one program per page."""
    return max(1, min(max_pages, -(-8 * sm_count // max(batch, 1))))


def run(
    q_index_fp8: torch.Tensor,  # [B, H, D] float8_e4m3fn
    k_index_cache_fp8: torch.Tensor,  # [P, page_size, 1, D + 4] int8 bytes, packed per page
    weights: torch.Tensor,  # [B, H] f32
    seq_lens: torch.Tensor,  # [B] int32
    block_table: torch.Tensor,  # [B, max_pages] int32
    topk_indices: torch.Tensor,  # [B, topk] int32, written
    *,
    num_warps: int = 4,
    num_splits: int | None = None,
    stages: int = 2,
    operands: str = "bf16",
    compact_cols: int = 128,
) -> None:
    """Destination-passing entry point: fills ``topk_indices``.

    The keyword-only knobs exist for tuning scripts; the harness never passes them.
    """
    batch, num_heads, dim = q_index_fp8.shape
    num_pages, page_size, _, width = k_index_cache_fp8.shape
    max_pages = block_table.shape[1]
    topk = topk_indices.shape[1]
    if width != dim + 4:
        raise ValueError(f"k_index_cache_fp8: last dim {width} != head dim {dim} + 4 scale "
                         "bytes; expected DeepGEMM's packed FP8 page layout")
    if not k_index_cache_fp8.is_contiguous():
        raise ValueError("k_index_cache_fp8: must be contiguous (pages are read as raw bytes)")
    for name, t in (("q_index_fp8", q_index_fp8), ("weights", weights),
                    ("block_table", block_table), ("topk_indices", topk_indices)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name}: the last dimension must be contiguous (stride 1)")
    if compact_cols < 0 or compact_cols & (compact_cols - 1):
        raise ValueError(f"compact_cols = {compact_cols}: 0 (one scan) or a power of two")
    max_len = max_pages * page_size
    if max_len > MAX_TOKENS_PER_REQUEST:
        raise ValueError(f"block_table: {max_pages} pages a request ({max_len} tokens) exceeds "
                         f"this starter's limit of {MAX_TOKENS_PER_REQUEST} tokens")
    if batch == 0:
        return
    if max_pages == 0:
        topk_indices.fill_(-1)
        return

    # Scratch scores, one row per request (entries past seq_len are never written nor read).
    scores = torch.empty((batch, max_len), dtype=torch.float32, device=weights.device)
    # Programs per request: about two per SM in all (each streams its pages with pipelined
    # loads), never more than the request has pages.
    if num_splits is None:
        num_splits = plan_splits(batch, max_pages, _sm_count(weights.device))
    max_len_block = max(triton.next_power_of_2(max_len), 16)
    _indexer_kernel[(num_splits, batch)](
        q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, scores, topk_indices,
        _arrival_counters(weights.device, batch),
        num_heads, topk, q_index_fp8.stride(0), q_index_fp8.stride(1), weights.stride(0),
        block_table.stride(0), scores.stride(0), topk_indices.stride(0),
        PAGE=page_size, D=dim, BLOCK_H=max(16, triton.next_power_of_2(num_heads)),
        OPERANDS=_OPERANDS["fp32" if _INTERPRET else operands],
        BLOCK_L=max_len_block,
        BLOCK_TOPK=max(triton.next_power_of_2(topk), 16),
        COMPACT_COLS=0 if compact_cols == 0 else min(compact_cols, max_len_block),
        STAGES=1 if _INTERPRET else stages, num_warps=num_warps,
    )
