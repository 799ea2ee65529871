"""Reference for a DeepSeek-V3/R1 MoE layer on one expert-parallel rank, FP8 with block scales.

Steps, in this order, all in float32:
1. Dequantise: every FP8 value times the scale of its 128-wide block (activations: one scale per
   token and 128 hidden values, stored transposed as [hidden/128, T]; weights: one scale per
   128x128 tile). All local experts' weights are dequantised up front.
2. Route (DeepSeek no-aux): s = sigmoid(logits); biased = s + bias (used only to choose).
   The experts form 8 groups; a group scores the sum of its two largest biased values; the 4
   best groups stay; among their experts the 8 largest biased values are chosen. A token's
   weight for a chosen expert is s / (sum of s over its chosen experts + 1e-20) times
   routed_scaling_factor.
3. For each local expert e (global id local_expert_offset + e), for the tokens that chose it:
   G = x @ W1[e]^T; h = silu(G[:, I:]) * G[:, :I]; o = h @ W2[e]^T; output[token] += weight * o.
4. Round the accumulated output to bfloat16.

Sizes are read from the tensors, so the same code also runs on reduced problems in tests.
"""

import torch

BLOCK = 128
TOP_K = 8
NUM_GROUPS = 8
GROUPS_KEPT = 4


def _dequant_weights(weights_fp8, scales):
    """[E, R, C] fp8 with [E, R/128, C/128] tile scales -> [E, R, C] float32."""
    values = weights_fp8.to(torch.float32)
    per_row = torch.repeat_interleave(scales.to(torch.float32), BLOCK, dim=1)
    per_elem = torch.repeat_interleave(per_row, BLOCK, dim=2)
    return values * per_elem


def _dequant_tokens(hidden_fp8, scales_t):
    """[T, H] fp8 with [H/128, T] scales -> [T, H] float32."""
    values = hidden_fp8.to(torch.float32)
    per_token = scales_t.to(torch.float32).transpose(0, 1).contiguous()  # [T, H/128]
    per_elem = torch.repeat_interleave(per_token, BLOCK, dim=1)  # [T, H]
    return values * per_elem


def _route(routing_logits, routing_bias, routed_scaling_factor):
    """Return (chosen expert ids [T, 8], dense combine weights [T, num_experts])."""
    logits = routing_logits.to(torch.float32)
    bias = routing_bias.to(torch.float32).reshape(-1)
    num_tokens, num_experts = logits.shape
    per_group = num_experts // NUM_GROUPS

    probs = 1.0 / (1.0 + torch.exp(-logits))
    biased = probs + bias

    # Group score: the sum of the two largest biased values in the group.
    best_two, _ = torch.topk(
        biased.view(num_tokens, NUM_GROUPS, per_group), k=2, dim=2, sorted=False
    )
    group_score = best_two.sum(dim=2)  # [T, 8]
    _, kept_groups = torch.topk(group_score, k=GROUPS_KEPT, dim=1, sorted=False)
    group_on = torch.zeros_like(group_score)
    group_on.scatter_(1, kept_groups, 1.0)
    expert_on = group_on.unsqueeze(2).expand(num_tokens, NUM_GROUPS, per_group)
    expert_on = expert_on.reshape(num_tokens, num_experts)

    lowest = torch.finfo(torch.float32).min
    candidates = biased.masked_fill(expert_on == 0, lowest)
    _, chosen = torch.topk(candidates, k=TOP_K, dim=1, sorted=False)  # [T, 8]

    # Combine weights from the unbiased probabilities of the chosen experts.
    picked = torch.zeros_like(probs)
    picked.scatter_(1, chosen, 1.0)
    combine = probs * picked
    denom = combine.sum(dim=1, keepdim=True) + 1e-20
    combine = (combine / denom) * routed_scaling_factor
    return chosen, combine


@torch.no_grad()
def run(
    routing_logits,
    routing_bias,
    hidden_states,
    hidden_states_scale,
    gemm1_weights,
    gemm1_weights_scale,
    gemm2_weights,
    gemm2_weights_scale,
    local_expert_offset,
    routed_scaling_factor,
):
    num_tokens, hidden = hidden_states.shape
    num_local = gemm1_weights.shape[0]
    inter = gemm2_weights.shape[2]
    num_experts = routing_logits.shape[1]

    # 1. Dequantise activations and all local experts' weights.
    x = _dequant_tokens(hidden_states, hidden_states_scale)  # [T, H]
    w_up = _dequant_weights(gemm1_weights, gemm1_weights_scale)  # [E, 2I, H]
    w_down = _dequant_weights(gemm2_weights, gemm2_weights_scale)  # [E, H, I]

    # 2. Routing over all experts.
    chosen, combine = _route(routing_logits, routing_bias, routed_scaling_factor)

    # 3. Local experts, one at a time.
    acc = torch.zeros((num_tokens, hidden), dtype=torch.float32, device=hidden_states.device)
    first = int(local_expert_offset)
    for local in range(num_local):
        expert = first + local
        if expert < 0 or expert >= num_experts:
            continue
        uses = (chosen == expert).any(dim=1)  # [T]
        if not uses.any():
            continue
        rows = torch.nonzero(uses, as_tuple=False).squeeze(1)

        x_e = x.index_select(0, rows)  # [Tk, H]
        gate_up = x_e.matmul(w_up[local].t())  # [Tk, 2I]
        up = gate_up[:, :inter]
        gate = gate_up[:, inter:]
        hidden_act = (gate / (1.0 + torch.exp(-gate))) * up  # silu(gate) * up
        out_e = hidden_act.matmul(w_down[local].t())  # [Tk, H]

        weight = combine.index_select(0, rows)[:, expert]  # [Tk]
        acc.index_add_(0, rows, out_e * weight.unsqueeze(1))

    # 4. One rounding to bfloat16 at the end.
    return acc.to(torch.bfloat16)
