"""Checker of the DSA top-k indexer: its outputs are a selection, not values in positions.

The DSA top-k indexer returns *which* cache tokens score highest; with ties (and fp8 rounding at
the boundary) two correct kernels can return different indices in a different order. So the
check is about the selection, not the positions: every index must be a token the request can
reach, no token twice, as many tokens as the reference chose, and the chosen tokens' scores,
sorted, must match the reference selection's sorted scores within tolerance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fib_core.bench.evaluation.check import CheckResult
from fib_core.bench.evaluation.compare import element_failures
from fib_core.bench.evaluation.tolerance import Tolerance
from fib_core.data.trace import Correctness, EvaluationStatus

if TYPE_CHECKING:
    import torch

    from fib_core.data.definition import Definition

# Checker kinds a definition may name with "checker": "<kind>" in its JSON to use this one.
KINDS = ("dsa_topk_indexer",)
MAX_PROBLEMS_SHOWN = 3


def token_scores(
    ids: torch.Tensor, q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor
) -> torch.Tensor:
    """Scores [B, N] of the cache tokens ``ids`` [B, N] (valid global ids) for each request's
    queries ``q`` [B, heads, D] and head ``weights`` [B, heads]:

        score_t = sum_h relu(q_h . k_t) * weights_h, in fp32,

    with k_t dequantised from the packed page (page_size * D fp8 bytes token-major, then
    page_size fp32 scales). Only the given tokens' keys are read: the checker scores the chosen
    ones, not every token a request can reach.
    """
    import torch

    num_pages, page_size = cache.shape[0], cache.shape[1]
    head_dim = q.shape[-1]
    raw = cache.view(torch.uint8).reshape(num_pages, -1)
    split = page_size * head_dim
    page, slot = ids.div(page_size, rounding_mode="floor"), ids.remainder(page_size)
    values = raw[:, :split].reshape(num_pages, page_size, head_dim)[page, slot]
    scales = raw[:, split:].contiguous().view(torch.float32)[page, slot]
    keys = values.view(torch.float8_e4m3fn).float() * scales[..., None]
    logits = torch.relu(torch.einsum("bhd,bnd->bhn", q.float(), keys))
    return (logits * weights.float()[:, :, None]).sum(dim=1)


def dsa_token_scores(
    q: torch.Tensor, weights: torch.Tensor, cache: torch.Tensor, pages: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(global token ids, scores) of one request's first ``length`` reachable tokens; ids are
    page * page_size + slot (see :func:`token_scores`)."""
    import torch

    page_size = cache.shape[1]
    slots = torch.arange(page_size, device=pages.device)
    ids = (pages.long()[:, None] * page_size + slots[None, :]).reshape(-1)[:length]
    return ids, token_scores(ids[None], q[None], weights[None], cache)[0]


def reachable(
    ids: torch.Tensor, table: torch.Tensor, lengths: torch.Tensor, num_pages: int, page_size: int
) -> torch.Tensor:
    """Mask [B, N]: whether each id is among its request's first ``lengths[b]`` tokens through
    ``table`` (token t is page ``table[b, t // page_size]``, slot ``t % page_size``).

    Vectorised over requests: the earliest table position of every page per request, then an
    id is reachable iff that position's token for its slot comes before the length.
    """
    import torch

    rows, width = table.shape
    never = width
    positions = torch.arange(width, device=table.device).expand(rows, width)
    in_use = (positions * page_size < lengths[:, None]) & (table >= 0) & (table < num_pages)
    first = torch.full((rows, max(num_pages, 1)), never, dtype=torch.long, device=table.device)
    first.scatter_reduce_(
        1,
        table.clamp(0, max(num_pages - 1, 0)),
        torch.where(in_use, positions, torch.full_like(positions, never)),
        reduce="amin",
    )
    page, slot = ids.div(page_size, rounding_mode="floor"), ids.remainder(page_size)
    in_range = (ids >= 0) & (page < num_pages)
    where = first.gather(1, page.clamp(0, max(num_pages - 1, 0)))
    return in_range & (where < never) & (where * page_size + slot < lengths[:, None])


def check(
    definition: Definition,
    outputs: dict[str, Any],
    reference: dict[str, Any],
    inputs: dict[str, Any],
    tolerance: Tolerance,
) -> CheckResult:
    """Valid, unique, reachable indices whose sorted scores match the reference top-k's.

    Every request (row) is judged at once on the device; each row's first problem, in the
    order count, reachability, duplicates, scores, is what its message says.
    """
    import torch

    got = outputs["topk_indices"].long()
    device = got.device
    want = reference["topk_indices"].to(device).long()
    cache = inputs["k_index_cache_fp8"]
    lengths = inputs["seq_lens"].to(device).long()
    table = inputs["block_table"].to(device).long()
    rows, k = got.shape
    num_pages, page_size = cache.shape[0], cache.shape[1]
    pos = torch.arange(k, device=device).expand(rows, k)

    got_valid, want_valid = got != -1, want != -1
    n_got, n_want = got_valid.sum(1), want_valid.sum(1)
    got_reach = reachable(got, table, lengths, num_pages, page_size)
    want_reach = reachable(want, table, lengths, num_pages, page_size)
    unreachable = got_valid & ~got_reach
    first_unreachable = torch.where(unreachable, pos, k).amin(1)
    filler = -2 - pos  # distinct stand-ins for -1 pads, below every valid id
    ordered = torch.where(got_valid, got, filler).sort(dim=1).values
    twice = (ordered[:, 1:] == ordered[:, :-1]).any(1)
    count_bad, reach_bad = n_got != n_want, unreachable.any(1)
    scored = ~count_bad & ~reach_bad & ~twice  # rows whose scores decide
    broken_ref = scored[:, None] & want_valid & ~want_reach
    if bool(broken_ref.any()):
        row = int(broken_ref.any(1).nonzero()[0, 0])
        raise RuntimeError(f"reference top-k of row {row} holds unreachable indices")

    def sorted_scores(ids: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
        scores = token_scores(torch.where(ok, ids, 0), inputs["q_index_fp8"],
                              inputs["weights"], cache)
        return torch.where(ok, scores, float("-inf")).sort(dim=1, descending=True).values

    got_scores = sorted_scores(got, got_valid & got_reach)
    want_scores = sorted_scores(want, want_valid & want_reach)
    compared = scored[:, None] & (pos < n_want[:, None])
    failed, diff, rel = element_failures(got_scores, want_scores, tolerance)
    failed &= compared
    finite = torch.isfinite(got_scores) & torch.isfinite(want_scores) & compared
    failures = failed.sum(1)
    ratio = 1.0 - failures.double() / n_want.clamp_min(1).double()
    score_bad = scored & (ratio < tolerance.required_matched_ratio)
    first_rank = torch.where(failed, pos, k).amin(1)
    max_abs = float(torch.where(compared, diff, 0.0).max()) if rows and k else 0.0
    max_rel = float(torch.where(finite, rel, 0.0).max()) if rows and k else 0.0

    bad_value = got.gather(1, first_unreachable.clamp(max=max(k - 1, 0))[:, None])[:, 0]
    table_rows = torch.stack(
        [count_bad, reach_bad, twice, score_bad, n_got, n_want, lengths, bad_value, failures,
         first_rank]
    ).long().T.tolist()  # one copy to the host for the messages
    problems: list[str] = []
    rows_failed = score_failures = 0
    for b, (c_bad, r_bad, dup, s_bad, ng, nw, length, bad, fails, rank) in enumerate(table_rows):
        if c_bad:
            problem = (f"row {b}: {ng} indices chosen, the reference chose {nw} (seq_len "
                       f"{length}; -1 pads the rest)")
        elif r_bad:
            problem = (f"row {b}: index {bad} is not reachable (not among the request's first "
                       f"{length} tokens through block_table)")
        elif dup:
            problem = f"row {b}: the same index is chosen twice"
        elif s_bad:
            score_failures += fails
            problem = (f"row {b}: {fails} of {nw} sorted scores of the chosen tokens differ "
                       f"from the reference top-k's (first at rank {rank})")
        else:
            continue
        rows_failed += 1
        if len(problems) < MAX_PROBLEMS_SHOWN:
            problems.append(problem)
    correctness = Correctness(
        max_relative_error=max_rel,
        max_absolute_error=max_abs,
        extra={"rows": rows, "rows_failed": rows_failed, "score_failures": score_failures},
    )
    if rows_failed:
        message = f"topk_indices: {rows_failed} of {rows} rows wrong: " + "; ".join(problems)
        return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, correctness, message)
    return CheckResult(EvaluationStatus.PASSED, correctness, "")


check_dsa_topk_indexer = check  # the name it had before it moved into this folder
