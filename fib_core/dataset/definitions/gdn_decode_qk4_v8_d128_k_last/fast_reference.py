"""A faster reference with the same arithmetic as the kit's own, for the sets never timed.

The GDN decode reference updates one (request, v head) state at a time: 8 x batch small
products, about 5 ms per request on a GPU, so a batch of 64 takes about a third of a second per
call and a run checks ten input sets per workload. :func:`gdn_decode_batched` applies the same
per-(request, head) expressions, in the same order, to every request and head at once: fp32,
the state read as [K, V], the output rounded to bfloat16 once at the end. Its products are
batched, so a GPU (or a CPU BLAS) may sum them in another order: it agrees with the loop up to
fp32 rounding (tests compare them on every embedded workload).

The engine finds it through :mod:`fib_core.dataset.registry` (``fast_reference.py``, ``run``).

Example::

    from fib_core.dataset import registry
    fast = registry.get("gdn_decode_qk4_v8_d128_k_last").fast_reference
    output, new_state = fast(q, k, v, state, A_log, a, dt_bias, b, 0.0)
"""

from __future__ import annotations

import math


def gdn_decode_batched(q, k, v, state, A_log, a, dt_bias, b, scale):
    """GDN decode (k-last state) for every request and v head at once; see the module
    docstring.

    Per request and v head, in fp32: S <- g S; old = k S; new = beta v + (1 - beta) old;
    S <- S - k^T old + k^T new; out = scale q S (bfloat16 at the end).
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch
    import torch.nn.functional as F

    batch, _, q_heads, dim_k = q.shape
    k_heads = k.shape[2]
    v_heads, dim_v = v.shape[2], v.shape[3]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(dim_k)

    decay = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    decay = decay.squeeze(1)[..., None, None]  # [B, H, 1, 1]
    beta = torch.sigmoid(b.float()).squeeze(1)[..., None, None]
    query = q.squeeze(1).float().repeat_interleave(v_heads // q_heads, dim=1).unsqueeze(-2)
    key = k.squeeze(1).float().repeat_interleave(v_heads // k_heads, dim=1).unsqueeze(-2)
    value = v.squeeze(1).float().unsqueeze(-2)  # [B, H, 1, V]

    if state is None:
        s = torch.zeros((batch, v_heads, dim_k, dim_v), dtype=torch.float32, device=q.device)
    else:
        s = state.float().transpose(-1, -2)  # [B, H, K, V]

    s = decay * s
    old = key @ s  # [B, H, 1, V]
    new = beta * value + (1 - beta) * old
    key_col = key.transpose(-1, -2)  # [B, H, K, 1]
    s = s - key_col * old + key_col * new
    out = scale * (query @ s)  # [B, H, 1, V]
    return out.transpose(1, 2).to(torch.bfloat16), s.transpose(-1, -2).contiguous()


run = gdn_decode_batched
