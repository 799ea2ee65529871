"""Reference for the DeepSeek-V3.2 sparse-attention indexer: pick 2048 cache tokens per request.

Key cache page layout (DeepGEMM's packed FP8 format, 64 tokens a page, 64 * 132 bytes a page):
the first 64 * 128 bytes are the FP8 (e4m3) key values, token-major; the last 64 * 4 bytes are
one float32 scale per token. The tensor arrives as int8 bytes shaped [pages, 64, 1, 132], which
is NOT a per-token [values, scale] split: the page has to be unpacked as a whole.

Per request b, in float32: its first seq_lens[b] tokens are reached through block_table[b];
    score_t = sum over heads h of relu(q[b, h] . key_t) * weights[b, h]
and the min(2048, seq_len) best tokens are written as global ids (page * 64 + slot), in
descending score order, with -1 in the remaining slots.
"""

import torch

PAGE = 64
TOPK = 2048


def unpack_key_pages(cache_bytes):
    """[pages, 64, 1, 132] int8 -> dequantised keys [pages, 64, 128] float32."""
    raw = cache_bytes.view(torch.uint8)
    num_pages, page, _, width = raw.shape
    dim = width - 4
    per_page = raw.reshape(num_pages, page * width)

    value_bytes = per_page[:, : page * dim].contiguous()
    values = value_bytes.view(num_pages, page, dim).view(torch.float8_e4m3fn).to(torch.float32)

    scale_bytes = per_page[:, page * dim :].contiguous()
    scales = scale_bytes.view(num_pages, page, 4).view(torch.float32)  # [pages, 64, 1]
    return values * scales


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch, _, dim = q_index_fp8.shape
    device = q_index_fp8.device

    queries = q_index_fp8.to(torch.float32)  # [batch, 64, 128]
    keys = unpack_key_pages(k_index_cache_fp8)  # [pages, 64, 128]

    picked = torch.full((batch, TOPK), -1, dtype=torch.int32, device=device)

    for req in range(batch):
        length = int(seq_lens[req].item())
        if length == 0:
            continue
        pages_used = (length + PAGE - 1) // PAGE
        pages = block_table[req, :pages_used].to(torch.long)

        req_keys = keys[pages].reshape(-1, dim)[:length]  # [length, 128]
        per_head = torch.relu(queries[req] @ req_keys.T)  # [64, length]
        weighted = per_head * weights[req][:, None]
        score = weighted.sum(dim=0)  # [length]

        count = min(TOPK, length)
        _, local = torch.topk(score, count)  # positions inside the request, best first
        global_ids = pages[local // PAGE] * PAGE + local % PAGE
        picked[req, :count] = global_ids.to(torch.int32)

    return picked
