"""Checker of the DSA top-k indexer: its outputs are a selection, not values in positions.

The DSA top-k indexer returns *which* cache tokens score highest; with ties (and fp8 rounding at
the boundary) two correct kernels can return different indices in a different order. So the
check is about the selection, not the positions: every index must be a token the request can
reach, no token twice, as many tokens as the reference chose, and the chosen tokens' scores,
sorted, must match the reference selection's sorted scores within tolerance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fib_core.bench.check import CheckResult, Tolerance, compare_tensor
from fib_core.data.trace import Correctness, EvaluationStatus

if TYPE_CHECKING:
    import torch

    from fib_core.data.definition import Definition

# Checker kinds a definition may name with "checker": "<kind>" in its JSON to use this one.
KINDS = ("dsa_topk_indexer",)
MAX_PROBLEMS_SHOWN = 3


def _paged_fp8_keys(cache: torch.Tensor, pages: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Dequantised keys [len(pages) * page_size, head_dim] of the given pages.

    Page layout: page_size * head_dim fp8 bytes (token-major), then page_size fp32 scales.
    """
    import torch

    num_pages, page_size = cache.shape[0], cache.shape[1]
    raw = cache.view(torch.uint8).reshape(num_pages, -1)[pages.long()]
    split = page_size * head_dim
    values = raw[:, :split].contiguous().view(torch.float8_e4m3fn).float()
    values = values.reshape(-1, page_size, head_dim)
    scales = raw[:, split:].contiguous().view(torch.float32).reshape(-1, page_size, 1)
    return (values * scales).reshape(-1, head_dim)


def dsa_token_scores(
    q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor, pages: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(global token ids, scores) of one request's first ``length`` reachable tokens.

    score_t = sum_h relu(q_h . k_t) * weights_h, in fp32; ids are page * page_size + slot.
    """
    import torch

    page_size = cache.shape[1]
    head_dim = q.shape[-1]
    keys = _paged_fp8_keys(cache, pages, head_dim)[:length]
    logits = torch.relu(q.float() @ keys.T)  # [heads, length]
    scores = (logits * weights.float()[:, None]).sum(dim=0)
    slots = torch.arange(page_size, device=pages.device)
    ids = (pages.long()[:, None] * page_size + slots[None, :]).reshape(-1)[:length]
    return ids, scores


def _lookup(ids: torch.Tensor, scores: torch.Tensor, wanted: torch.Tensor) -> tuple[Any, Any]:
    """Scores of ``wanted`` ids and a mask of which ones are reachable at all."""
    import torch

    sorted_ids, order = torch.sort(ids)
    pos = torch.searchsorted(sorted_ids, wanted).clamp_(max=max(len(sorted_ids) - 1, 0))
    found = (
        sorted_ids[pos] == wanted if len(sorted_ids) else torch.zeros_like(wanted, dtype=torch.bool)
    )
    return scores[order[pos]] if len(sorted_ids) else wanted.float(), found


def check(
    definition: Definition,
    outputs: dict[str, Any],
    reference: dict[str, Any],
    inputs: dict[str, Any],
    tolerance: Tolerance,
) -> CheckResult:
    """Valid, unique, reachable indices whose sorted scores match the reference top-k's."""
    import torch

    got_all = outputs["topk_indices"]
    want_all = reference["topk_indices"].to(got_all.device)
    problems: list[str] = []
    max_abs = max_rel = 0.0
    rows_failed = 0
    score_failures = 0
    for b in range(got_all.shape[0]):
        length = int(inputs["seq_lens"][b].item())
        page_size = inputs["k_index_cache_fp8"].shape[1]
        n_pages = -(-length // page_size)
        pages = inputs["block_table"][b, :n_pages]
        ids, scores = dsa_token_scores(
            inputs["q_index_fp8"][b],
            inputs["weights"][b],
            inputs["k_index_cache_fp8"],
            pages,
            length,
        )
        got, want = got_all[b].long(), want_all[b].long()
        got_sel, want_sel = got[got != -1], want[want != -1]
        row_problem = None
        got_scores, reachable = _lookup(ids, scores, got_sel)
        if got_sel.numel() != want_sel.numel():
            row_problem = (
                f"row {b}: {got_sel.numel()} indices chosen, the reference chose "
                f"{want_sel.numel()} (seq_len {length}; -1 pads the rest)"
            )
        elif not bool(reachable.all()):
            bad = int(got_sel[~reachable][0].item())
            row_problem = (
                f"row {b}: index {bad} is not reachable (not among the request's first "
                f"{length} tokens through block_table)"
            )
        elif torch.unique(got_sel).numel() != got_sel.numel():
            row_problem = f"row {b}: the same index is chosen twice"
        else:
            want_scores, want_ok = _lookup(ids, scores, want_sel)
            if not bool(want_ok.all()):
                raise RuntimeError(f"reference top-k of row {b} holds unreachable indices")
            cmp = compare_tensor(
                "scores",
                torch.sort(got_scores, descending=True).values,
                torch.sort(want_scores, descending=True).values,
                tolerance,
            )
            max_abs, max_rel = max(max_abs, cmp.max_abs), max(max_rel, cmp.max_rel)
            if cmp.matched_ratio < tolerance.required_matched_ratio:
                score_failures += cmp.failed
                row_problem = (
                    f"row {b}: {cmp.failed} of {cmp.numel} sorted scores of the chosen tokens "
                    f"differ from the reference top-k's (first at rank {cmp.first_failures[0][0]})"
                )
        if row_problem is not None:
            rows_failed += 1
            if len(problems) < MAX_PROBLEMS_SHOWN:
                problems.append(row_problem)
    correctness = Correctness(
        max_relative_error=max_rel,
        max_absolute_error=max_abs,
        extra={
            "rows": int(got_all.shape[0]),
            "rows_failed": rows_failed,
            "score_failures": score_failures,
        },
    )
    if rows_failed:
        message = f"topk_indices: {rows_failed} of {got_all.shape[0]} rows wrong: " + "; ".join(
            problems
        )
        return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, correctness, message)
    return CheckResult(EvaluationStatus.PASSED, correctness, "")


check_dsa_topk_indexer = check  # the name it had before it moved into this folder
