"""fib_core.apply: route a function's calls to the fastest recorded solution, by shape.

    from fib_core.apply import apply, enable_apply, ApplyConfig

    @apply("gdn_decode_qk4_v8_d128_k_last")
    def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale):
        ...  # the model's own code: runs when no solution is recorded for the call's shapes

    with enable_apply("path/to/dataset", ApplyConfig(aot_ratio=0.5)):
        out, new_state = gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale)

Names and meaning follow the organizers' ``flashinfer_bench.apply``. Importing this package
does not import torch.
"""

from __future__ import annotations

from .api import ApplyHandle, apply, disable_apply, enable_apply
from .binding import ArgBinder
from .config import ON_MISS_POLICIES, ApplyConfig, ApplyConfigError
from .hook import get_apply_hook, set_apply_hook
from .key import (
    ApplyKey,
    ApplyKeyBuilder,
    ApplyKeyError,
    ApplyKeyFactory,
    AxesOnlyKeyBuilder,
    GEMMKeyBuilder,
    GQAKeyBuilder,
    MLAKeyBuilder,
)
from .runtime import MISS, ApplyMissError, ApplyRuntime, get_runtime, set_runtime
from .table import ApplyTable, DefinitionRoutes, table_digest

__all__ = [
    "MISS",
    "ON_MISS_POLICIES",
    "ApplyConfig",
    "ApplyConfigError",
    "ApplyHandle",
    "ApplyKey",
    "ApplyKeyBuilder",
    "ApplyKeyError",
    "ApplyKeyFactory",
    "ApplyMissError",
    "ApplyRuntime",
    "ApplyTable",
    "ArgBinder",
    "AxesOnlyKeyBuilder",
    "DefinitionRoutes",
    "GEMMKeyBuilder",
    "GQAKeyBuilder",
    "MLAKeyBuilder",
    "apply",
    "disable_apply",
    "enable_apply",
    "get_apply_hook",
    "get_runtime",
    "set_apply_hook",
    "set_runtime",
    "table_digest",
]
