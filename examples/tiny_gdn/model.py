"""TinyGDN: a small gated-delta-net language model with random weights, for the apply demo.

Each layer projects the hidden state to the contest's GDN shapes (4 q/k heads, 8 value heads,
head size 128) and calls :func:`gdn_prefill` over the packed prompts, then :func:`gdn_decode`
once per generated token. Both are decorated with ``apply``: with apply off they run the
kit's reference implementation (the model's "own code"); with apply on, a recorded solution
runs wherever one won at the call's shapes. The tracer records both kinds of call.

Nothing is downloaded; ``TinyGDN(seed=0)`` always builds the same weights.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from fib_core.apply import apply
from fib_core.dataset.references import load_reference

DECODE_DEF = "gdn_decode_qk4_v8_d128_k_last"
PREFILL_DEF = "gdn_prefill_qk4_v8_d128_k_last"
QK_HEADS, V_HEADS, HEAD = 4, 8, 128
SCALE = 1.0 / math.sqrt(HEAD)

_decode_ref = load_reference(DECODE_DEF)["run"]
_prefill_ref = load_reference(PREFILL_DEF)["run"]


@apply(DECODE_DEF)
def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale):
    """One decode step for a batch of requests: (output, new_state)."""
    return _decode_ref(q, k, v, state, A_log, a, dt_bias, b, scale)


@apply(PREFILL_DEF)
def gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """Packed prompts (boundaries in cu_seqlens): (output, final state per sequence)."""
    return _prefill_ref(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)


class GDNLayer(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        qk, vv = QK_HEADS * HEAD, V_HEADS * HEAD
        self.norm = torch.nn.LayerNorm(hidden)
        self.proj = torch.nn.Linear(hidden, 2 * qk + vv + 2 * V_HEADS, bias=False)
        self.out = torch.nn.Linear(vv, hidden, bias=False)
        self.A_log = torch.nn.Parameter(torch.empty(V_HEADS).uniform_(-1.0, 0.5))
        self.dt_bias = torch.nn.Parameter(torch.empty(V_HEADS).uniform_(-1.0, 1.0))
        self.sizes = (qk, qk, vv, V_HEADS, V_HEADS)

    def _split(self, x: torch.Tensor, lead: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        q, k, v, a, b = self.proj(self.norm(x)).split(self.sizes, dim=-1)
        q = F.normalize(q.float().view(*lead, QK_HEADS, HEAD), dim=-1).bfloat16()
        k = F.normalize(k.float().view(*lead, QK_HEADS, HEAD), dim=-1).bfloat16()
        v = v.view(*lead, V_HEADS, HEAD).bfloat16()
        return q, k, v, a.bfloat16(), b.bfloat16()

    def prefill(self, x: torch.Tensor, cu_seqlens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        total = x.shape[0]
        q, k, v, a, b = self._split(x, (total,))
        state = torch.zeros(
            cu_seqlens.numel() - 1, V_HEADS, HEAD, HEAD, device=x.device, dtype=torch.float32
        )
        A_log, dt_bias = self.A_log.float(), self.dt_bias.float()
        out, new_state = gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, SCALE)
        return x + self.out(out.reshape(total, -1).to(x.dtype)), new_state

    def decode(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, Any]:
        batch = x.shape[0]
        q, k, v, a, b = self._split(x.unsqueeze(1), (batch, 1))
        A_log, dt_bias = self.A_log.float(), self.dt_bias.float()
        out, new_state = gdn_decode(q, k, v, state, A_log, a, dt_bias, b, SCALE)
        return x + self.out(out.reshape(batch, -1).to(x.dtype)), new_state


class TinyGDN(torch.nn.Module):
    """Embedding, ``layers`` GDN layers, a language-model head; greedy generation."""

    def __init__(self, vocab: int = 512, hidden: int = 256, layers: int = 2, seed: int = 0):
        super().__init__()
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(GDNLayer(hidden) for _ in range(layers))
        self.head = torch.nn.Linear(hidden, vocab, bias=False)
        torch.random.set_rng_state(gen_state)

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], new_tokens: int) -> torch.Tensor:
        """Prefill the prompts together, then decode ``new_tokens`` greedily for each."""
        device = self.embed.weight.device
        lengths = [len(p) for p in prompts]
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
        cu = cu.to(device)
        x = self.embed(torch.tensor([t for p in prompts for t in p], device=device))
        states = []
        for layer in self.layers:
            x, state = layer.prefill(x, cu)
            states.append(state)
        last = x[cu[1:] - 1]
        tokens = []
        for _ in range(new_tokens):
            token = self.head(last).argmax(-1)
            tokens.append(token)
            x = self.embed(token)
            for i, layer in enumerate(self.layers):
                x, states[i] = layer.decode(x, states[i])
            last = x
        return torch.stack(tokens, dim=1)


def make_prompts(batch: int, length: int, vocab: int = 512, seed: int = 0) -> list[list[int]]:
    """``batch`` prompts of lengths around ``length`` (different, so prefill is ragged)."""
    gen = torch.Generator().manual_seed(seed + batch * 1000 + length)
    out = []
    for i in range(batch):
        n = max(1, length + (i % 3) - 1)
        out.append(torch.randint(0, vocab, (n,), generator=gen).tolist())
    return out
