"""The DSA top-k indexer checker on a miniature paged fp8 cache (page size 4, head dim 8)."""

from __future__ import annotations

import pytest
import torch

from fib_core.bench.evaluation.check import check_outputs
from fib_core.checking import Tolerance
from fib_core.data.definition import Definition
from fib_core.dataset import registry

dsa_token_scores = registry.get("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64").module(
    "checker"
).dsa_token_scores
PAGE, DIM, HEADS, TOPK, PAGES = 4, 8, 2, 4, 6
TOL = Tolerance(1e-2, 1e-2, 1.0)


@pytest.fixture(scope="module")
def mini_indexer() -> Definition:
    axes = {"b": {"type": "var"}, "p": {"type": "const", "value": PAGES},
            "ps": {"type": "const", "value": PAGE}, "h": {"type": "const", "value": HEADS},
            "d": {"type": "const", "value": DIM}, "one": {"type": "const", "value": 1},
            "dws": {"type": "const", "value": DIM + 4}, "mp": {"type": "var"},
            "k": {"type": "const", "value": TOPK}}
    return Definition.from_dict({
        "name": "mini_topk_indexer", "op_type": "test", "checker": "dsa_topk_indexer",
        "axes": axes,
        "inputs": {
            "q_index_fp8": {"shape": ["b", "h", "d"], "dtype": "float8_e4m3fn"},
            "k_index_cache_fp8": {"shape": ["p", "ps", "one", "dws"], "dtype": "int8"},
            "weights": {"shape": ["b", "h"], "dtype": "float32"},
            "seq_lens": {"shape": ["b"], "dtype": "int32"},
            "block_table": {"shape": ["b", "mp"], "dtype": "int32"},
        },
        "outputs": {"topk_indices": {"shape": ["b", "k"], "dtype": "int32"}},
        "reference": "def run(*a):\n    pass\n",
    })


def _pack(keys, scales):
    raw = torch.cat([keys.view(torch.uint8).reshape(PAGES, -1),
                     scales.view(torch.uint8).reshape(PAGES, -1)], dim=1)
    return raw.view(torch.int8).reshape(PAGES, PAGE, 1, DIM + 4)


def _inputs(tie_at_boundary: bool = False):
    g = torch.Generator().manual_seed(0)
    keys = torch.randn(PAGES, PAGE, DIM, generator=g).to(torch.float8_e4m3fn)
    scales = torch.rand(PAGES, PAGE, generator=g) + 0.5
    q = torch.randn(2, HEADS, DIM, generator=g).to(torch.float8_e4m3fn)
    weights = torch.rand(2, HEADS, generator=g)
    seq_lens = torch.tensor([7, 3], dtype=torch.int32)
    block_table = torch.tensor([[2, 5], [4, 0]], dtype=torch.int32)
    inp = {"q_index_fp8": q, "k_index_cache_fp8": _pack(keys, scales), "weights": weights,
           "seq_lens": seq_lens, "block_table": block_table}
    if tie_at_boundary:  # copy the last chosen token of request 0 onto the first left out
        scores = _true_scores(inp, keys, scales, 0)
        ranked = sorted(scores, key=lambda i: -scores[i])
        last_in, first_out = ranked[TOPK - 1], ranked[TOPK]
        keys[first_out // PAGE, first_out % PAGE] = keys[last_in // PAGE, last_in % PAGE]
        scales[first_out // PAGE, first_out % PAGE] = scales[last_in // PAGE, last_in % PAGE]
        inp["k_index_cache_fp8"] = _pack(keys, scales)
    return inp, keys, scales


def _true_scores(inp, keys, scales, b):
    """Plain loops: token t of request b is page block_table[b, t // 4], slot t % 4."""
    out = {}
    for t in range(int(inp["seq_lens"][b])):
        page, slot = int(inp["block_table"][b, t // PAGE]), t % PAGE
        k = keys[page, slot].float() * scales[page, slot]
        total = 0.0
        for h in range(HEADS):
            total += max(0.0, float(inp["q_index_fp8"][b, h].float() @ k)) * float(inp["weights"][b, h])
        out[page * PAGE + slot] = total
    return out


def _reference(inp, keys, scales):
    rows = []
    for b in range(2):
        scores = _true_scores(inp, keys, scales, b)
        best = sorted(scores, key=lambda i: -scores[i])[:TOPK]
        rows.append(best + [-1] * (TOPK - len(best)))
    return torch.tensor(rows, dtype=torch.int32)


def _check(defn, inp, got, ref):
    args = [inp[n] for n in defn.input_names]
    return check_outputs(defn, [got], [ref], tolerance=TOL, inputs=args)


def test_scores_match_a_plain_loop():
    inp, keys, scales = _inputs()
    ids, scores = dsa_token_scores(inp["q_index_fp8"][0], inp["weights"][0],
                                   inp["k_index_cache_fp8"], inp["block_table"][0, :2], 7)
    expected = _true_scores(inp, keys, scales, 0)
    assert sorted(ids.tolist()) == sorted(expected)
    for i, s in zip(ids.tolist(), scores.tolist(), strict=True):
        assert abs(s - expected[i]) < 1e-4


def test_same_selection_in_any_order_passes(mini_indexer):
    inp, keys, scales = _inputs()
    ref = _reference(inp, keys, scales)
    shuffled = ref.clone()
    shuffled[0] = ref[0].flip(0)
    res = _check(mini_indexer, inp, shuffled, ref)
    assert res.passed, res.message
    assert res.correctness.extra["checker"] == "dsa_topk_indexer"


def test_tie_broken_the_other_way_passes(mini_indexer):
    inp, keys, scales = _inputs(tie_at_boundary=True)
    scores = _true_scores(inp, keys, scales, 0)
    ref = _reference(inp, keys, scales)
    chosen = ref[0].tolist()
    tied = [i for i in scores if i not in chosen and scores[i] == scores[chosen[-1]]]
    assert tied, "the fixture must put a tie at the boundary"
    got = ref.clone()
    got[0, -1] = tied[0]  # the other token of the tie: index-by-index wrong, selection right
    assert not torch.equal(got, ref)
    assert _check(mini_indexer, inp, got, ref).passed


@pytest.mark.parametrize(
    ("row0", "needle"),
    [
        ([23, 8, 9, 10], "is not reachable"),  # page 5 slot 3 = token 7: beyond seq_len 7
        ([8, 8, 9, 10], "chosen twice"),
        ([8, 9, 10, -1], "3 indices chosen, the reference chose 4"),
        ([-2147483648, 8, 9, 10], "is not reachable"),  # an unwritten (poisoned) element
    ],
)
def test_invalid_selections_fail_with_a_reason(mini_indexer, row0, needle):
    inp, keys, scales = _inputs()
    ref = _reference(inp, keys, scales)
    got = ref.clone()
    got[0] = torch.tensor(row0, dtype=torch.int32)
    res = _check(mini_indexer, inp, got, ref)
    assert res.status.value == "INCORRECT_NUMERICAL" and needle in res.message
    assert "row 0" in res.message


def test_a_lower_scoring_token_fails(mini_indexer):
    inp, keys, scales = _inputs()
    scores = _true_scores(inp, keys, scales, 0)
    ref = _reference(inp, keys, scales)
    chosen = set(ref[0].tolist())
    worst_left_out = min((i for i in scores if i not in chosen), key=lambda i: scores[i])
    best_chosen = max(chosen, key=lambda i: scores[i])
    if abs(scores[worst_left_out] - scores[best_chosen]) < 0.05:
        pytest.skip("scores too close for this seed")
    got = ref.clone()
    got[0][ref[0] == best_chosen] = worst_left_out
    res = _check(mini_indexer, inp, got, ref)
    assert res.status.value == "INCORRECT_NUMERICAL" and "sorted scores" in res.message


def test_short_request_pads_with_minus_one(mini_indexer):
    inp, keys, scales = _inputs()
    ref = _reference(inp, keys, scales)
    assert ref[1].tolist().count(-1) == 1  # seq_len 3 < topk 4
    got = ref.clone()
    got[1] = torch.tensor([-1] + [i for i in ref[1].tolist() if i != -1], dtype=torch.int32)
    assert _check(mini_indexer, inp, got, ref).passed
