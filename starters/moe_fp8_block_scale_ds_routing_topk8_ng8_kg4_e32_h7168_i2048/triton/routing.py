"""DeepSeek-V3 routing (no auxiliary loss), plus per-local-expert token lists.

A token's 256 routing scores fit in one row of a register tile, so group scores, the group
choice and the expert choice are a few reductions and no memory round trips. The same step
appends each (token, slot) pair that landed on a local expert to that expert's list with an
atomic counter, so the grouped GEMMs can start without sorting and without a host sync.
"""

from __future__ import annotations

import triton
import triton.language as tl

TOP_K = 8
NUM_GROUPS = 8
GROUPS_KEPT = 4


@triton.jit
def route_phase(
    pid, num_programs,
    logits_ptr, bias_ptr, ids_ptr, weights_ptr, prow_ptr, counts_ptr, lists_ptr,
    num_tokens, expert_offset, scaling, stride_logits,
    NUM_EXPERTS: tl.constexpr, N_GROUPS: tl.constexpr, KEPT: tl.constexpr,
    TOPK: tl.constexpr, E_LOCAL: tl.constexpr, BLOCK_T: tl.constexpr,
):
    """Blocks of BLOCK_T tokens, pid, pid + num_programs, ...: choose 8 experts per token and
    append the local pairs.

    Writes ids [T, 8] (global expert ids, order of choice), weights [T, 8] (normalised unbiased
    scores times the scaling factor), prow [T, 8] = -1 (GEMM2 later writes the padded row of
    each local pair), and for local pairs counts[e] += 1 and lists[e, rank] = token * 8 + slot.
    A block of tokens per step, not one: with a few persistent programs per SM, one token's
    chain of reductions would leave the SM idle between steps (tens of thousands of tokens).
    """
    GROUP: tl.constexpr = NUM_EXPERTS // N_GROUPS
    experts = tl.arange(0, NUM_EXPERTS)
    groups = tl.arange(0, N_GROUPS)
    in_group = tl.arange(0, GROUP)
    slots = tl.arange(0, TOPK)
    bias = tl.load(bias_ptr + experts).to(tl.float32)
    for start in range(pid * BLOCK_T, num_tokens, num_programs * BLOCK_T):
        tokens = start + tl.arange(0, BLOCK_T)
        live = tokens < num_tokens
        # Scores: s (unbiased, used for the weights) and s + bias (used only to choose).
        logits = tl.load(logits_ptr + tokens[:, None] * stride_logits + experts[None, :],
                         mask=live[:, None], other=0.0)
        s = tl.sigmoid(logits.to(tl.float32))  # [BLOCK_T, NUM_EXPERTS]
        biased = s + bias[None, :]

        # Group score = sum of the two largest biased values of the group. Masking only the
        # first argmax keeps a tied maximum as the second value, as a top-2 would.
        grouped = tl.reshape(biased, [BLOCK_T, N_GROUPS, GROUP])
        best = tl.max(grouped, axis=2)
        best_at = tl.argmax(grouped, axis=2)
        second = tl.max(tl.where(in_group[None, None, :] == best_at[:, :, None], -float("inf"),
                                 grouped), axis=2)
        group_score = best + second  # [BLOCK_T, N_GROUPS]

        # Keep the KEPT best groups; every expert outside them drops out of the choice.
        allowed = (tokens[:, None] * 0 + experts[None, :]) < 0
        for _ in tl.static_range(KEPT):
            g = tl.argmax(group_score, axis=1)
            allowed = allowed | ((experts // GROUP)[None, :] == g[:, None])
            group_score = tl.where(groups[None, :] == g[:, None], -float("inf"), group_score)
        candidates = tl.where(allowed, biased, -float("inf"))

        # Top-8 experts by biased score, one argmax at a time (8 is small and fixed).
        chosen = tl.zeros([BLOCK_T, TOPK], dtype=tl.int32)
        chosen_s = tl.zeros([BLOCK_T, TOPK], dtype=tl.float32)
        for k in tl.static_range(TOPK):
            i = tl.argmax(candidates, axis=1)
            hit = experts[None, :] == i[:, None]
            chosen = tl.where(slots[None, :] == k, i[:, None], chosen)
            chosen_s = tl.where(slots[None, :] == k, tl.sum(tl.where(hit, s, 0.0), axis=1)[:, None],
                                chosen_s)
            candidates = tl.where(hit, -float("inf"), candidates)
        weights = chosen_s / (tl.sum(chosen_s, axis=1)[:, None] + 1e-20) * scaling

        # Append the local choices to their experts' lists (order inside a list is arbitrary).
        pair = tokens[:, None] * TOPK + slots[None, :]
        local = chosen - expert_offset
        is_local = (local >= 0) & (local < E_LOCAL) & live[:, None]
        rank = tl.atomic_add(counts_ptr + local, 1, mask=is_local)
        tl.store(lists_ptr + local.to(tl.int64) * num_tokens + rank, pair, mask=is_local)
        tl.store(ids_ptr + pair, chosen, mask=live[:, None])
        tl.store(weights_ptr + pair, weights, mask=live[:, None])
        tl.store(prow_ptr + pair, chosen * 0 - 1, mask=live[:, None])


def check_num_experts(num_experts: int) -> None:
    """The routing's group split needs a power of two of at least 8 experts."""
    if num_experts < NUM_GROUPS or num_experts & (num_experts - 1):
        raise ValueError(f"routing_logits: {num_experts} experts; expected a power of two >= 8")
