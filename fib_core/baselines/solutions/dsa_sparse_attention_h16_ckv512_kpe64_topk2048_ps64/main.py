"""FlashInfer baseline of dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64: FlashInfer's
TensorRT-LLM MLA decode kernel (``trtllm_batch_decode_with_kv_cache_mla``, SM100 only) in its
sparse mode, each query token attending to the 2048 cache tokens its row of sparse_indices
names (flat ids page * 64 + slot, -1 for padding).

The kernel wants one key row per cached token ([ckv | kpe], 576 values) and one query row per
head ([q_nope | q_pe]): both are concatenated here on every call, as the contest's own baseline
does. FlashInfer's log-sum-exp is base 2, as the definition's.
"""

import torch
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla

WORKSPACE_BYTES = 128 * 1024 * 1024
QK_NOPE_HEAD_DIM = 128  # DeepSeek-V3's; the absorbed (latent) form does not use it
_workspaces = {}


def _workspace(device):
    """One zeroed workspace per device, kept across calls (the kernel's semaphores live there)."""
    buffer = _workspaces.get(device)
    if buffer is None:
        buffer = _workspaces[device] = torch.zeros(WORKSPACE_BYTES, dtype=torch.int8, device=device)
    return buffer


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    num_tokens, num_heads, dim_ckv = q_nope.shape
    dim_kpe = q_pe.shape[-1]
    num_pages, page_size, _ = ckv_cache.shape
    topk = sparse_indices.shape[-1]
    scale = float(sm_scale.item()) if isinstance(sm_scale, torch.Tensor) else float(sm_scale)

    query = torch.cat([q_nope, q_pe], dim=-1).unsqueeze(1)  # [T, 1, H, 576]
    kv_cache = torch.cat([ckv_cache, kpe_cache], dim=-1).unsqueeze(1)  # [P, 1, 64, 576]
    cache_tokens = num_pages * page_size
    seq_lens = torch.full((num_tokens,), cache_tokens, dtype=torch.int32, device=q_nope.device)
    output, lse = trtllm_batch_decode_with_kv_cache_mla(
        query=query,
        kv_cache=kv_cache,
        workspace_buffer=_workspace(q_nope.device),
        qk_nope_head_dim=QK_NOPE_HEAD_DIM,
        kv_lora_rank=dim_ckv,
        qk_rope_head_dim=dim_kpe,
        block_tables=sparse_indices.unsqueeze(1),  # [T, 1, topk]
        seq_lens=seq_lens,
        max_seq_len=cache_tokens,
        sparse_mla_top_k=topk,
        bmm1_scale=scale,
        bmm2_scale=1.0,
        return_lse=True,
    )
    output = output.reshape(num_tokens, num_heads, dim_ckv).to(torch.bfloat16)
    lse = lse.reshape(num_tokens, num_heads).float()
    return output, lse
