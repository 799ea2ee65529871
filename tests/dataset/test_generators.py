"""Structured inputs are valid for a kernel: ids in range, pages distinct, lengths consistent."""

from __future__ import annotations

import math

import pytest
import torch

from fib_core.dataset import generators as G
from fib_core.dataset.references import load_reference


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(("tokens", "pages"), [(1, 8462), (8, 8462), (7, 40), (3, 20)])
def test_dsa_sparse_indices_point_into_existing_pages_with_tail_padding(tokens, pages):
    idx = G.dsa_sparse_indices(tokens, pages, _gen(tokens))
    assert idx.shape == (tokens, G.TOPK) and idx.dtype == torch.int32
    assert ((idx == -1) | ((idx >= 0) & (idx < pages * G.PAGE_SIZE))).all()
    for row in idx:
        valid = row[row != -1]
        assert (row[: valid.numel()] != -1).all(), "padding must be a tail, not holes"
        assert valid.unique().numel() == valid.numel(), "a token selects a cache row twice"
    counts = (idx != -1).sum(dim=1)
    assert counts[0] < G.TOPK, "the first token's context is short: its row ends in -1"
    if tokens >= 2 and pages * G.PAGE_SIZE >= G.TOPK:
        assert counts[-1] == G.TOPK


@pytest.mark.parametrize(("batch", "max_pages", "pages"), [(1, 1, 11923), (31, 91, 11923), (4, 17, 11923), (6, 5, 20)])
def test_indexer_block_table_is_consistent_with_seq_lens(batch, max_pages, pages):
    lens, table = G.indexer_seq_lens_block_table(batch, max_pages, pages, _gen(batch))
    assert lens.shape == (batch,) and lens.dtype == torch.int32
    assert table.shape == (batch, max_pages) and table.dtype == torch.int32
    assert (lens >= 1).all() and (lens <= max_pages * G.PAGE_SIZE).all()
    assert lens.max() > (max_pages - 1) * G.PAGE_SIZE, "the table is exactly as wide as needed"
    valid = [table[b, : math.ceil(int(lens[b]) / G.PAGE_SIZE)] for b in range(batch)]
    for row in valid:
        assert ((row >= 0) & (row < pages)).all()
        assert row.unique().numel() == row.numel(), "a request lists a page twice"
    everything = torch.cat(valid)
    if batch * max_pages <= pages:
        assert everything.unique().numel() == everything.numel(), "two requests share a page"
    if batch >= 3:
        assert (lens < G.PAGE_SIZE).any(), "some request should be shorter than one page"


def test_packed_key_cache_decodes_to_the_quantised_keys():
    cache = G.indexer_packed_key_cache(5, _gen(3), chunk_pages=2)
    assert cache.shape == (5, 64, 1, 132) and cache.dtype == torch.int8
    keys = load_reference("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64")["unpack_key_pages"](cache)
    assert torch.isfinite(keys).all()
    # Per token the largest |value| maps to the fp8 maximum, so |key| peaks near the N(0,1) tail.
    peak = keys.abs().amax(dim=-1)
    assert (peak > 0.5).all() and (peak < 8).all()
    # Same seed, same bytes (chunking must not change the stream's use).
    again = G.indexer_packed_key_cache(5, _gen(3), chunk_pages=2)
    assert torch.equal(cache, again)


@pytest.mark.parametrize(("total", "seqs"), [(6, 1), (32, 2), (8192, 57), (4124, 15), (16, 16)])
def test_cu_seqlens_split_the_tokens_into_non_empty_sequences(total, seqs):
    cu = G.gdn_cu_seqlens(total, seqs, _gen(total))
    assert cu.dtype == torch.int64 and cu.shape == (seqs + 1,)
    assert cu[0] == 0 and cu[-1] == total
    lengths = cu.diff()
    assert (lengths >= 1).all()
    if seqs >= 2 and total - seqs >= 63:
        assert (lengths < 64).any(), "a sequence shorter than one chunk is expected"
    if seqs >= 10 and total >= 4 * seqs:
        assert lengths.unique().numel() > seqs // 2, "lengths should vary"


def test_cu_seqlens_rejects_impossible_split():
    with pytest.raises(G.StructuredInputError, match="total_seq_len=3, num_seqs=4"):
        G.gdn_cu_seqlens(3, 4, _gen())


def test_gdn_gates_are_in_a_remembering_range():
    a_log, dt_bias = G.gdn_gate_params(8, _gen(5))
    a = torch.randn(4096, 8, generator=_gen(6))
    g = torch.exp(-torch.exp(a_log) * torch.nn.functional.softplus(a + dt_bias))
    assert (g > 0).all() and (g < 1).all()
    assert g.median() > 0.3, "gates this small would wipe the state every token"


def test_gdn_state_stays_bounded_over_a_long_sequence():
    """Unit keys and the generated gates keep the recurrence stable (raw N(0,1) keys diverge)."""
    gen = _gen(11)
    axes = {"total_seq_len": 512, "num_seqs": 1}
    s = G.GENERATORS["gdn_prefill_qk4_v8_d128_k_last"](None, axes, gen, "cpu")
    assert torch.allclose(s["q"].float().norm(dim=-1), torch.ones(512, 4), atol=1e-2)
    run = load_reference("gdn_prefill_qk4_v8_d128_k_last")["run"]
    v = torch.randn(512, 8, 128, generator=gen).to(torch.bfloat16)
    a = torch.randn(512, 8, generator=gen).to(torch.bfloat16)
    b = torch.randn(512, 8, generator=gen).to(torch.bfloat16)
    cu = torch.tensor([0, 512])
    out, state = run(s["q"], s["k"], v, s["state"], s["A_log"], a, s["dt_bias"], b, cu, G.GDN_SCALE)
    assert torch.isfinite(state).all() and state.abs().max() < 100
    assert torch.isfinite(out.float()).all()


def test_moe_routing_is_unbalanced_but_covers_experts():
    logits, bias = G.moe_routing(2048, 256, _gen(8))
    assert logits.shape == (2048, 256) and logits.dtype == torch.float32
    assert bias.shape == (256,) and bias.dtype == torch.bfloat16
    route = load_reference("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048")["_route"]
    chosen, weights = route(logits, bias, G.ROUTED_SCALING_FACTOR)
    load = torch.bincount(chosen.reshape(-1), minlength=256)
    assert (load > 0).sum() > 200, "most experts get some tokens"
    assert load.max() > 3 * load.float().mean(), "real routing has hot experts"
    torch.testing.assert_close(weights.sum(dim=1), torch.full((2048,), 2.5))


def test_generators_are_seeded_and_return_definition_shapes():
    axes = {"batch_size": 3, "max_num_pages": 4, "num_pages": 50}
    one = G.GENERATORS["dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"](None, axes, _gen(1), "cpu")
    two = G.GENERATORS["dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"](None, axes, _gen(1), "cpu")
    assert set(one) == {"k_index_cache_fp8", "seq_lens", "block_table"}
    assert all(torch.equal(one[k], two[k]) for k in one)
    other = G.GENERATORS["dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"](None, axes, _gen(2), "cpu")
    assert not torch.equal(one["k_index_cache_fp8"], other["k_index_cache_fp8"])


def test_the_engine_finds_every_definition_folder_generator():
    inputs_mod = pytest.importorskip("fib_core.bench.evaluation.inputs")
    from fib_core.dataset import registry

    assert len(G.GENERATORS) == 5
    for name, fn in G.GENERATORS.items():
        assert inputs_mod.input_generator_for(name) is fn
        assert registry.get(name).generator is fn


def test_gdn_decode_draws_many_timed_sets_at_once_with_the_same_structure():
    """The timed-only sets of GDN decode come from one draw: each set's q and k rows are unit
    length, its state has the per-set generator's spread, its gates are in the model's range,
    and no two sets share contents."""
    generate = G.GENERATORS["gdn_decode_qk4_v8_d128_k_last"]
    drawn = generate(None, {"batch_size": 3}, _gen(11), "cpu", sets=5)
    assert drawn["q"].shape == drawn["k"].shape == (5, 3, 1, 4, 128)
    assert drawn["state"].shape == (5, 3, 8, 128, 128)
    assert drawn["A_log"].shape == drawn["dt_bias"].shape == (5, 8)
    for j in range(5):
        for name in ("q", "k"):
            norms = drawn[name][j].float().norm(dim=-1)
            assert torch.allclose(norms, torch.ones_like(norms), atol=1e-2)
        rate = drawn["A_log"][j].exp()
        assert ((rate >= 1) & (rate <= 16)).all()
        assert 0.5 / math.sqrt(128) < drawn["state"][j].std() < 2 / math.sqrt(128)
    for i in range(5):
        for j in range(i + 1, 5):
            assert not torch.equal(drawn["state"][i], drawn["state"][j])
            assert not torch.equal(drawn["A_log"][i], drawn["A_log"][j])
    one = generate(None, {"batch_size": 3}, _gen(11), "cpu")
    assert one["q"].shape == (3, 1, 4, 128) and one["A_log"].shape == (8,)
