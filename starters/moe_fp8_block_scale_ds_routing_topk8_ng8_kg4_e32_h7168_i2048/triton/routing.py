"""DeepSeek-V3 routing (no auxiliary loss) in one kernel, plus per-local-expert token lists.

One program per token: the 256 routing scores fit in one vector, so group scores, the group
choice and the expert choice are a few reductions and no memory round trips. The same program
appends each (token, slot) pair that landed on a local expert to that expert's list with an
atomic counter, so the grouped GEMMs can start without sorting and without a host sync.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

TOP_K = 8
NUM_GROUPS = 8
GROUPS_KEPT = 4


@dataclass(frozen=True)
class Routing:
    """Routing results, all on the device.

    topk_ids [T, 8] int32: global expert ids (order of choice).
    topk_weights [T, 8] f32: normalised unbiased scores times the scaling factor.
    local_ids [T, 8] int32: local expert index of each choice, -1 when not local.
    ranks [T, 8] int32: position of the pair in its local expert's list (-1 when not local).
    counts [E] int32: pairs per local expert.
    lists [E, T] int32: pair ids (token * 8 + slot) per local expert; the first counts[e] valid.
    """

    topk_ids: torch.Tensor
    topk_weights: torch.Tensor
    local_ids: torch.Tensor
    ranks: torch.Tensor
    counts: torch.Tensor
    lists: torch.Tensor

    @property
    def num_local(self) -> int:
        return self.counts.shape[0]


@triton.jit
def _routing_kernel(
    logits_ptr, bias_ptr,
    ids_ptr, weights_ptr, local_ptr, rank_ptr, counts_ptr, lists_ptr,
    num_tokens, expert_offset, scaling, stride_logits,
    NUM_EXPERTS: tl.constexpr, N_GROUPS: tl.constexpr, KEPT: tl.constexpr,
    TOPK: tl.constexpr, E_LOCAL: tl.constexpr,
):
    token = tl.program_id(0)
    GROUP: tl.constexpr = NUM_EXPERTS // N_GROUPS
    experts = tl.arange(0, NUM_EXPERTS)

    # Scores: s (unbiased, used for the weights) and s + bias (used only to choose).
    logits = tl.load(logits_ptr + token.to(tl.int64) * stride_logits + experts)
    s = tl.sigmoid(logits)
    biased = s + tl.load(bias_ptr + experts).to(tl.float32)

    # Group score = sum of the two largest biased values of the group. Masking only the first
    # argmax keeps a tied maximum as the second value, as a top-2 would.
    grouped = tl.reshape(biased, [N_GROUPS, GROUP])
    in_group = tl.arange(0, GROUP)
    best = tl.max(grouped, axis=1)
    best_at = tl.argmax(grouped, axis=1)
    second = tl.max(tl.where(in_group[None, :] == best_at[:, None], -float("inf"), grouped), axis=1)
    group_score = best + second

    # Keep the KEPT best groups; every expert outside them drops out of the choice.
    groups = tl.arange(0, N_GROUPS)
    allowed = experts < 0
    for _ in tl.static_range(KEPT):
        g = tl.argmax(group_score, axis=0)
        allowed = allowed | (experts // GROUP == g)
        group_score = tl.where(groups == g, -float("inf"), group_score)
    candidates = tl.where(allowed, biased, -float("inf"))

    # Top-8 experts by biased score, one argmax at a time (8 is small and fixed).
    slots = tl.arange(0, TOPK)
    chosen = tl.zeros([TOPK], dtype=tl.int32)
    chosen_s = tl.zeros([TOPK], dtype=tl.float32)
    for k in tl.static_range(TOPK):
        i = tl.argmax(candidates, axis=0)
        chosen = tl.where(slots == k, i, chosen)
        chosen_s = tl.where(slots == k, tl.sum(tl.where(experts == i, s, 0.0)), chosen_s)
        candidates = tl.where(experts == i, -float("inf"), candidates)
    weights = chosen_s / (tl.sum(chosen_s) + 1e-20) * scaling

    # Append the local choices to their experts' lists (order inside a list is arbitrary).
    pair = token * TOPK + slots
    local = chosen - expert_offset
    is_local = (local >= 0) & (local < E_LOCAL)
    rank = tl.atomic_add(counts_ptr + local, 1, mask=is_local)
    tl.store(lists_ptr + local.to(tl.int64) * num_tokens + rank, pair, mask=is_local)
    tl.store(ids_ptr + pair, chosen)
    tl.store(weights_ptr + pair, weights)
    tl.store(local_ptr + pair, tl.where(is_local, local, -1))
    tl.store(rank_ptr + pair, tl.where(is_local, rank, -1))


def route(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    local_expert_offset: int,
    routed_scaling_factor: float,
    num_local: int,
) -> Routing:
    """Choose 8 experts per token and build the local experts' token lists."""
    num_tokens, num_experts = routing_logits.shape
    if num_experts % NUM_GROUPS or num_experts & (num_experts - 1):
        raise ValueError(f"routing_logits: {num_experts} experts; expected a power of two")
    if routing_logits.stride(1) != 1:
        routing_logits = routing_logits.contiguous()
    dev = routing_logits.device
    ids = torch.empty((num_tokens, TOP_K), dtype=torch.int32, device=dev)
    weights = torch.empty((num_tokens, TOP_K), dtype=torch.float32, device=dev)
    local_ids = torch.empty_like(ids)
    ranks = torch.empty_like(ids)
    counts = torch.zeros(num_local, dtype=torch.int32, device=dev)
    lists = torch.empty((num_local, num_tokens), dtype=torch.int32, device=dev)
    if num_tokens:
        _routing_kernel[(num_tokens,)](
            routing_logits, routing_bias.contiguous(),
            ids, weights, local_ids, ranks, counts, lists,
            num_tokens, int(local_expert_offset), float(routed_scaling_factor),
            routing_logits.stride(0),
            NUM_EXPERTS=num_experts, N_GROUPS=NUM_GROUPS, KEPT=GROUPS_KEPT,
            TOPK=TOP_K, E_LOCAL=num_local,
            num_warps=4,
        )
    return Routing(ids, weights, local_ids, ranks, counts, lists)
