"""Checker of the DSA top-k indexer: its outputs are a selection, not values in positions.

The DSA top-k indexer returns *which* cache tokens score highest; with ties (and fp8 rounding at
the boundary) two correct kernels can return different indices in a different order. So the
check is about the selection, not the positions: every index must be a token the request can
reach, no token twice, as many tokens as the reference chose, and the chosen tokens' scores,
sorted, must match the reference selection's sorted scores within tolerance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from fib_core.checking import CheckResult, Tolerance, element_failures
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
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
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
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
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
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
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


class _Selections(NamedTuple):
    """Both selections of every row (request) on the solution's device, and what judges them."""

    got: torch.Tensor  # [rows, k] the solution's token ids, -1 pads
    want: torch.Tensor  # [rows, k] the reference's
    lengths: torch.Tensor  # [rows] seq_lens
    table: torch.Tensor  # [rows, pages] block_table
    cache: torch.Tensor  # the packed key cache
    pos: torch.Tensor  # [rows, k] each column's rank


class _Validity(NamedTuple):
    """Each row's problems before scores (count, reachability, duplicates), per row [rows]."""

    got_ok: torch.Tensor  # [rows, k] the solution's valid, reachable ids
    want_ok: torch.Tensor  # [rows, k] the reference's
    n_got: torch.Tensor
    n_want: torch.Tensor
    first_unreachable: torch.Tensor  # column of the first unreachable id (k if none)
    count_bad: torch.Tensor
    reach_bad: torch.Tensor
    twice: torch.Tensor
    scored: torch.Tensor  # rows without those problems: their scores decide


class _Scores(NamedTuple):
    """The sorted chosen scores against the reference's, per row [rows], and the worst errors."""

    bad: torch.Tensor  # below the required matched ratio
    failures: torch.Tensor  # failing ranks
    first_rank: torch.Tensor  # the first failing rank (k if none)
    max_abs: float
    max_rel: float


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
    selections = _selections(outputs, reference, inputs)
    validity = _validity(selections)
    scores = _scores(selections, validity, inputs, tolerance)
    problems, rows_failed, score_failures = _row_problems(selections, validity, scores)
    rows = selections.got.shape[0]
    correctness = Correctness(
        max_relative_error=scores.max_rel,
        max_absolute_error=scores.max_abs,
        extra={"rows": rows, "rows_failed": rows_failed, "score_failures": score_failures},
    )
    if rows_failed:
        message = f"topk_indices: {rows_failed} of {rows} rows wrong: " + "; ".join(problems)
        return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, correctness, message)
    return CheckResult(EvaluationStatus.PASSED, correctness, "")


def _selections(
    outputs: dict[str, Any], reference: dict[str, Any], inputs: dict[str, Any]
) -> _Selections:
    """The solution's and the reference's top-k as long tensors on the solution's device."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    got = outputs["topk_indices"].long()
    device = got.device
    rows, k = got.shape
    return _Selections(
        got=got,
        want=reference["topk_indices"].to(device).long(),
        lengths=inputs["seq_lens"].to(device).long(),
        table=inputs["block_table"].to(device).long(),
        cache=inputs["k_index_cache_fp8"],
        pos=torch.arange(k, device=device).expand(rows, k),
    )


def _validity(sel: _Selections) -> _Validity:
    """Count, reachability and duplicates of every row's choice; raises when the reference
    itself chose a token its row cannot reach (the inputs or the reference are broken)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    k = sel.got.shape[1]
    num_pages, page_size = sel.cache.shape[0], sel.cache.shape[1]
    got_valid, want_valid = sel.got != -1, sel.want != -1
    n_got, n_want = got_valid.sum(1), want_valid.sum(1)
    got_reach = reachable(sel.got, sel.table, sel.lengths, num_pages, page_size)
    want_reach = reachable(sel.want, sel.table, sel.lengths, num_pages, page_size)
    unreachable = got_valid & ~got_reach
    first_unreachable = torch.where(unreachable, sel.pos, k).amin(1)
    filler = -2 - sel.pos  # distinct stand-ins for -1 pads, below every valid id
    ordered = torch.where(got_valid, sel.got, filler).sort(dim=1).values
    twice = (ordered[:, 1:] == ordered[:, :-1]).any(1)
    count_bad, reach_bad = n_got != n_want, unreachable.any(1)
    scored = ~count_bad & ~reach_bad & ~twice
    broken_ref = scored[:, None] & want_valid & ~want_reach
    if bool(broken_ref.any()):
        row = int(broken_ref.any(1).nonzero()[0, 0])
        raise RuntimeError(f"reference top-k of row {row} holds unreachable indices")
    return _Validity(got_valid & got_reach, want_valid & want_reach, n_got, n_want,
                     first_unreachable, count_bad, reach_bad, twice, scored)


def _sorted_scores(
    ids: torch.Tensor, ok: torch.Tensor, inputs: dict[str, Any], cache: torch.Tensor
) -> torch.Tensor:
    """Each row's scores of the ``ok`` ids, highest first; the others score -inf (last)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    scores = token_scores(torch.where(ok, ids, 0), inputs["q_index_fp8"], inputs["weights"],
                          cache)
    return torch.where(ok, scores, float("-inf")).sort(dim=1, descending=True).values


def _scores(
    sel: _Selections, val: _Validity, inputs: dict[str, Any], tolerance: Tolerance
) -> _Scores:
    """The chosen tokens' sorted scores against the reference choice's, rank by rank, under
    the organizers' element rule; only the scored rows' first ``n_want`` ranks count."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    rows, k = sel.got.shape
    got_scores = _sorted_scores(sel.got, val.got_ok, inputs, sel.cache)
    want_scores = _sorted_scores(sel.want, val.want_ok, inputs, sel.cache)
    compared = val.scored[:, None] & (sel.pos < val.n_want[:, None])
    failed, diff, rel = element_failures(got_scores, want_scores, tolerance)
    failed &= compared
    finite = torch.isfinite(got_scores) & torch.isfinite(want_scores) & compared
    failures = failed.sum(1)
    ratio = 1.0 - failures.double() / val.n_want.clamp_min(1).double()
    return _Scores(
        bad=val.scored & (ratio < tolerance.required_matched_ratio),
        failures=failures,
        first_rank=torch.where(failed, sel.pos, k).amin(1),
        max_abs=float(torch.where(compared, diff, 0.0).max()) if rows and k else 0.0,
        max_rel=float(torch.where(finite, rel, 0.0).max()) if rows and k else 0.0,
    )


def _row_problems(
    sel: _Selections, val: _Validity, scores: _Scores
) -> tuple[list[str], int, int]:
    """(the first :data:`MAX_PROBLEMS_SHOWN` failing rows' messages, failing rows, failing
    score ranks over all rows): each row's first problem, read in one copy to the host."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    k = sel.got.shape[1]
    bad_value = sel.got.gather(1, val.first_unreachable.clamp(max=max(k - 1, 0))[:, None])[:, 0]
    table_rows = torch.stack(
        [val.count_bad, val.reach_bad, val.twice, scores.bad, val.n_got, val.n_want,
         sel.lengths, bad_value, scores.failures, scores.first_rank]
    ).long().T.tolist()
    problems = [p for b, row in enumerate(table_rows) if (p := _row_problem(b, *row)) is not None]
    # A row failing on scores has no earlier problem (only rows without one are scored).
    score_failures = sum(row[8] for row in table_rows if row[3])
    return problems[:MAX_PROBLEMS_SHOWN], len(problems), score_failures


def _row_problem(b: int, c_bad: int, r_bad: int, dup: int, s_bad: int, ng: int, nw: int,
                 length: int, bad: int, fails: int, rank: int) -> str | None:
    """Row ``b``'s first problem in the order count, reachability, duplicates, scores."""
    if c_bad:
        return (f"row {b}: {ng} indices chosen, the reference chose {nw} (seq_len "
                f"{length}; -1 pads the rest)")
    if r_bad:
        return (f"row {b}: index {bad} is not reachable (not among the request's first "
                f"{length} tokens through block_table)")
    if dup:
        return f"row {b}: the same index is chosen twice"
    if s_bad:
        return (f"row {b}: {fails} of {nw} sorted scores of the chosen tokens differ "
                f"from the reference top-k's (first at rank {rank})")
    return None
