"""FlashInfer's GDN decode (``gated_delta_rule_decode_pretranspose``, k-last state) -> apply.

Routed as ``gdn_decode_qk4_v8_d128_k_last`` when the call fits the definition: 4 q/k heads,
8 value heads, head size 128, one token per request, the state passed directly (no pool
indices, no intermediate-state buffer, state update on). With ``use_qk_l2norm=True`` (the
default) q and k are L2-normalised first, since the definition takes normalised rows. The
state is updated in place and ``output`` (when given) written, as FlashInfer does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..common import route_or_call, shape_of
from .function_call import FunctionAdapter

DEF_NAME = "gdn_decode_qk4_v8_d128_k_last"
UNSUPPORTED_OPTIONS = (
    "initial_state",
    "initial_state_indices",
    "output_state_indices",
    "intermediate_states_buffer",
)


class GDNDecodeAdapter(FunctionAdapter):
    """Targets and wrapper for FlashInfer's GDN decode entry point."""

    DEF_NAME = DEF_NAME
    NAME = "gdn_decode"
    FUNCTION = "gated_delta_rule_decode_pretranspose"
    MODULE = "gdn_decode"

    @staticmethod
    def fits(bound: dict[str, Any]) -> bool:
        q, v = shape_of(bound.get("q")), shape_of(bound.get("v"))
        if q is None or v is None or len(q) != 4 or q[1:] != (1, 4, 128):
            return False
        return (
            shape_of(bound.get("k")) == q
            and v == (q[0], 1, 8, 128)
            and shape_of(bound.get("state")) == (q[0], 8, 128, 128)
            and all(bound.get(name) is None for name in UNSUPPORTED_OPTIONS)
            and not bound.get("disable_state_update", False)
        )

    def call(
        self, bound: dict[str, Any], orig: Callable[..., Any], args: tuple, kwargs: dict[str, Any]
    ) -> Any:
        q, k, state = bound["q"], bound["k"], bound["state"]
        if bound.get("use_qk_l2norm", True):
            # Imported here: torch takes ~3 s to load, and importing this module does not need it.
            import torch.nn.functional as F

            q = F.normalize(q.float(), dim=-1).to(q.dtype)
            k = F.normalize(k.float(), dim=-1).to(k.dtype)
        scale = bound.get("scale")
        runtime_kwargs = {
            "q": q,
            "k": k,
            "v": bound["v"],
            "state": state,
            "A_log": bound["A_log"],
            "a": bound["a"],
            "dt_bias": bound["dt_bias"],
            "b": bound["b"],
            "scale": 1.0 / math.sqrt(128) if scale is None else float(scale),
        }
        routed, result = route_or_call(self.def_name, runtime_kwargs, orig, args, kwargs)
        if not routed:
            return result
        output, new_state = result
        state.copy_(new_state)
        given = bound.get("output")
        if given is not None:
            given.copy_(output)
            output = given
        return output, state
