"""Shared pieces of the FlashInfer adapters: routing a call with the original as fallback, and
the attention wrappers' layout, softmax-scale and output helpers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fib_core.apply import apply

if TYPE_CHECKING:
    import torch

_FELL_BACK = object()


def route_or_call(
    def_name: str,
    runtime_kwargs: dict[str, Any],
    original: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
) -> tuple[bool, Any]:
    """Function-mode apply with the original call as fallback: (routed?, result)."""
    held: dict[str, Any] = {}

    def fallback(**_: Any) -> Any:
        held["result"] = original(*args, **kwargs)
        return _FELL_BACK

    result = apply(def_name, runtime_kwargs=runtime_kwargs, fallback=fallback)
    if result is _FELL_BACK:
        return False, held["result"]
    return True, result


def shape_of(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return None if shape is None else tuple(shape)


# --- attention wrappers: layouts, scales, outputs ---------------------------------------------

KV_LAYOUTS = ("NHD", "HND")


def infer_kv_layout_from_args(inst: Any) -> str | None:
    """The KV layout a FlashInfer wrapper object was built with ("NHD"/"HND"), or None.

    FlashInfer keeps the constructor's ``kv_layout`` on the instance; the adapters read it so a
    routed call can bring the cache to the definitions' NHD order::

        infer_kv_layout_from_args(wrapper)  # -> "NHD"
    """
    for attr in ("_kv_layout", "kv_layout"):
        value = getattr(inst, attr, None)
        if isinstance(value, str) and value.upper() in KV_LAYOUTS:
            return value.upper()
    return None


def _first_paged_tensor(paged_kv_cache: Any) -> Any:
    """The K half of a paged cache: a (k, v) pair, or one tensor [pages, 2, ...]."""
    if isinstance(paged_kv_cache, (tuple, list)):
        return paged_kv_cache[0] if paged_kv_cache else None
    shape = shape_of(paged_kv_cache)
    if shape is not None and len(shape) == 5:
        return paged_kv_cache[:, 0]
    return paged_kv_cache


def _layout_from_dims(seq_dim: int, head_dim_pos: int, num_kv_heads: int) -> str | None:
    if head_dim_pos == num_kv_heads and seq_dim != num_kv_heads:
        return "NHD"
    if seq_dim == num_kv_heads and head_dim_pos != num_kv_heads:
        return "HND"
    return None  # both or neither match: the tensor alone cannot tell


def infer_paged_kv_layout_from_tensors(paged_kv_cache: Any, num_kv_heads: int) -> str | None:
    """Guess a paged cache's layout from where ``num_kv_heads`` sits; None when ambiguous.

    A page is [page_size, heads, dim] in NHD and [heads, page_size, dim] in HND::

        infer_paged_kv_layout_from_tensors(torch.zeros(3, 16, 8, 64), 8)  # -> "NHD"
    """
    shape = shape_of(_first_paged_tensor(paged_kv_cache))
    if shape is None or len(shape) != 4:
        return None
    return _layout_from_dims(shape[1], shape[2], num_kv_heads)


def infer_ragged_kv_layout_from_tensors(ragged_k_or_v: Any, num_kv_heads: int) -> str | None:
    """Guess a ragged K or V's layout: [tokens, heads, dim] is NHD, [heads, tokens, dim] HND.

    ::

        infer_ragged_kv_layout_from_tensors(torch.zeros(8, 100, 64), 8)  # -> "HND"
    """
    shape = shape_of(ragged_k_or_v)
    if shape is None or len(shape) != 3:
        return None
    return _layout_from_dims(shape[0], shape[1], num_kv_heads)


def _check_layout(kv_layout: str) -> str:
    layout = str(kv_layout).upper()
    if layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout: found {kv_layout!r}, expected one of {KV_LAYOUTS}")
    return layout


def normalize_paged_kv_to_nhd(paged_kv_cache: Any, kv_layout: str) -> Any:
    """The paged cache in NHD order (a view; same container kind: pair or single tensor).

    HND swaps the page's head and position axes back::

        k, v = normalize_paged_kv_to_nhd((k_hnd, v_hnd), "HND")
    """
    if _check_layout(kv_layout) == "NHD":
        return paged_kv_cache
    if isinstance(paged_kv_cache, (tuple, list)):
        return type(paged_kv_cache)(t.transpose(-3, -2) for t in paged_kv_cache)
    return paged_kv_cache.transpose(-3, -2)


def normalize_ragged_kv_to_nhd(ragged_k_or_v: Any, kv_layout: str) -> Any:
    """A ragged K or V as [tokens, heads, dim] (a view)::

    k = normalize_ragged_kv_to_nhd(k_hnd, "HND")
    """
    if _check_layout(kv_layout) == "NHD":
        return ragged_k_or_v
    return ragged_k_or_v.transpose(-3, -2)


def pick_sm_scale_gqa(head_dim: int, maybe: Any) -> float:
    """The softmax scale: the caller's value if given, else FlashInfer's 1/sqrt(head_dim).

    ::

        pick_sm_scale_gqa(128, None)  # -> 0.0884
    """
    if maybe is not None:
        return float(maybe)
    if head_dim <= 0:
        raise ValueError(f"head_dim: found {head_dim}, expected a positive size")
    return 1.0 / math.sqrt(head_dim)


def pick_sm_scale_mla(head_dim_qk_nope: int, head_dim_qk_pe: int, maybe: Any) -> float:
    """MLA's softmax scale: the caller's value, else 1/sqrt(nope + rope part of q.k).

    The scores are q_nope.ckv + q_pe.kpe, a dot product over both parts::

        pick_sm_scale_mla(128, 64, None)  # -> 1/sqrt(192)
    """
    return pick_sm_scale_gqa(head_dim_qk_nope + head_dim_qk_pe, maybe)


def write_back_outputs(
    *,
    output: torch.Tensor,
    lse: torch.Tensor,
    want_lse: bool,
    out_buf: Any = None,
    lse_buf: Any = None,
) -> Any:
    """Return a routed result the way the wrapper would: into the caller's buffers if given,
    ``(output, lse)`` when ``return_lse`` was asked, else ``output`` alone::

        return write_back_outputs(output=o, lse=l, want_lse=False, out_buf=out)
    """
    if out_buf is not None:
        out_buf.copy_(output)
        output = out_buf
    if lse_buf is not None and lse is not None:
        lse_buf.copy_(lse)
        lse = lse_buf
    return (output, lse) if want_lse else output
