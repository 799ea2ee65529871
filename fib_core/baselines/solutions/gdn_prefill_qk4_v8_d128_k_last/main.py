"""FlashInfer baseline of gdn_prefill_qk4_v8_d128_k_last: FlashInfer's chunked gated delta rule
(``chunk_gated_delta_rule``; SM90 and SM100 kernels) over the packed sequences.

The kernel takes the gates ready-made, per token and v head in float32: the forget gate
exp(-exp(A_log) * softplus(a + dt_bias)) and beta = sigmoid(b); both are computed here.
"""

import math

import torch
import torch.nn.functional as F
from flashinfer.gdn_prefill import chunk_gated_delta_rule


def _scale_of(scale, head_size):
    value = float(scale.item()) if isinstance(scale, torch.Tensor) else float(scale or 0.0)
    return value if value != 0.0 else 1.0 / math.sqrt(head_size)


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    forget = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    output, new_state = chunk_gated_delta_rule(
        q=q,
        k=k,
        v=v,
        g=forget,
        beta=beta,
        scale=_scale_of(scale, q.shape[-1]),
        initial_state=state,
        output_final_state=True,
        cu_seqlens=cu_seqlens,
        use_qk_l2norm_in_kernel=False,
    )
    return output, new_state
