"""FlashInfer baseline of gdn_decode_qk4_v8_d128_k_last: one call of FlashInfer's
``gated_delta_rule_decode_pretranspose`` (the k-last state kernel; SM90 and SM100).

The kernel computes the gates (from A_log, a, dt_bias, b) itself and updates ``state`` in place,
returning it as the new state, as the contest's own baseline does.
"""

import math

import torch
from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose


def _scale_of(scale, head_size):
    value = float(scale.item()) if isinstance(scale, torch.Tensor) else float(scale or 0.0)
    return value if value != 0.0 else 1.0 / math.sqrt(head_size)


def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    batch, steps, v_heads, head_size = v.shape
    output = torch.empty((batch, steps, v_heads, head_size), dtype=q.dtype, device=q.device)
    output, new_state = gated_delta_rule_decode_pretranspose(
        q=q,
        k=k,
        v=v,
        state=state,
        A_log=A_log,
        a=a,
        dt_bias=dt_bias,
        b=b,
        scale=_scale_of(scale, q.shape[-1]),
        output=output,
        use_qk_l2norm=False,
    )
    return output, new_state
