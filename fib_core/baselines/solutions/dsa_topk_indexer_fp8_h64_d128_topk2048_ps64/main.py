"""FlashInfer/DeepGEMM baseline of dsa_topk_indexer_fp8_h64_d128_topk2048_ps64: DeepGEMM's
``fp8_paged_mqa_logits`` scores every cached token of each request (SM90 and SM100), then
FlashInfer's ``top_k_page_table_transform`` picks the 2048 best and maps them through the
block table to global token ids (page * 64 + slot), -1 past a request's length.

The key cache arrives as int8 bytes in DeepGEMM's own packed FP8 layout (per page, 64 x 128
FP8 values then 64 float32 scales), so it is handed over as it is, viewed as uint8.
"""

import deep_gemm
import torch
from flashinfer import top_k_page_table_transform

TOPK = 2048
_sm_counts = {}


def _sm_count(device):
    count = _sm_counts.get(device)
    if count is None:
        count = _sm_counts[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return count


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch = q_index_fp8.shape[0]
    page_size = k_index_cache_fp8.shape[1]
    max_tokens = block_table.shape[1] * page_size
    lengths = seq_lens.to(torch.int32)
    tables = block_table.to(torch.int32)

    schedule = deep_gemm.get_paged_mqa_logits_metadata(
        lengths, page_size, _sm_count(q_index_fp8.device)
    )
    logits = deep_gemm.fp8_paged_mqa_logits(
        q_index_fp8.unsqueeze(1),  # [batch, next_n = 1, heads, dim]
        k_index_cache_fp8.view(torch.uint8),
        weights,
        lengths,
        tables,
        schedule,
        max_tokens,
        clean_logits=True,
    )
    # One entry per cached token: the page's id times 64 plus the slot, read by token position.
    slots = torch.arange(page_size, dtype=torch.int32, device=tables.device)
    token_table = (tables.unsqueeze(-1) * page_size + slots).reshape(batch, max_tokens)
    return top_k_page_table_transform(logits[:, :max_tokens].contiguous(), token_table, lengths, TOPK)
