"""Reference for DeepSeek-V3.2 sparse MLA attention over a paged cache (64 tokens a page).

Each query token attends only to the cache tokens listed in its row of ``sparse_indices``
(flat ids ``page * 64 + slot``; -1 marks padding). A key has two parts, the compressed row
(512 values, also used as the value) and the rotary row (64 values). Per token, all 16 heads
at once, in float32:

    scores = (q_nope . ckv_j + q_pe . kpe_j) * sm_scale       over the selected j
    lse    = log2(sum_j exp(scores_j))                       (base-2 log-sum-exp)
    output = softmax(scores) @ ckv_selected                  (rounded to bfloat16)

A token whose row holds no valid id keeps output 0 and lse -inf.
"""

import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    num_tokens, num_heads, dim_ckv = q_nope.shape
    dim_kpe = q_pe.shape[-1]
    device = q_nope.device

    # The whole cache, one float32 row per cached token: [num_pages * 64, dim].
    ckv_rows = ckv_cache.reshape(-1, dim_ckv).to(torch.float32)
    kpe_rows = kpe_cache.reshape(-1, dim_kpe).to(torch.float32)

    output = torch.zeros((num_tokens, num_heads, dim_ckv), dtype=torch.bfloat16, device=device)
    lse = torch.full((num_tokens, num_heads), float("-inf"), dtype=torch.float32, device=device)

    for tok in range(num_tokens):
        ids = sparse_indices[tok]
        chosen = ids[ids != -1]
        if chosen.numel() == 0:
            continue  # nothing to attend to: output stays 0, lse stays -inf
        rows = chosen.to(torch.long)

        keys_c = ckv_rows[rows]  # [n, 512], also the values
        keys_p = kpe_rows[rows]  # [n, 64]
        query_c = q_nope[tok].to(torch.float32)  # [16, 512]
        query_p = q_pe[tok].to(torch.float32)  # [16, 64]

        raw = (query_c @ keys_c.T) + (query_p @ keys_p.T)  # [16, n]
        scores = raw * sm_scale

        lse[tok] = torch.logsumexp(scores, dim=-1) / math.log(2.0)
        probs = torch.softmax(scores, dim=-1)
        output[tok] = (probs @ keys_c).to(torch.bfloat16)

    return output, lse
