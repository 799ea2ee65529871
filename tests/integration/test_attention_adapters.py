"""FlashInfer's attention wrappers (plan/run) on a fake FlashInfer, and the layout, scale and
output helpers the adapters share."""

from __future__ import annotations

import importlib.util
import math
import sys
import textwrap

import pytest
import torch

from fib_core.apply import set_apply_hook, set_runtime
from fib_core.integration import get_manager, install_flashinfer_integrations
from fib_core.integration.flashinfer import (
    GQAPagedDecodeAdapter,
    GQAPagedPrefillAdapter,
    MLAPagedAdapter,
    RaggedPrefillAdapter,
)
from fib_core.integration.flashinfer.common import (
    infer_kv_layout_from_args,
    infer_paged_kv_layout_from_tensors,
    infer_ragged_kv_layout_from_tensors,
    normalize_paged_kv_to_nhd,
    normalize_ragged_kv_to_nhd,
    pick_sm_scale_gqa,
    pick_sm_scale_mla,
    write_back_outputs,
)

# Each fake run returns something that depends on its arguments and on what plan stored on the
# instance, so a test can tell the original ran with the same arguments and the same plan.
FAKE_WRAPPERS = """
class _Base:
    def __init__(self, workspace=None, kv_layout="NHD"):
        self._kv_layout = kv_layout
        self.calls = []


class BatchDecodeWithPagedKVCacheWrapper(_Base):
    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim,
             page_size, pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None,
             q_data_type="float16", kv_data_type=None, sm_scale=None):
        self.planned = (num_qo_heads, num_kv_heads, head_dim, page_size)

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None,
            out=None, lse=None, return_lse=False):
        self.calls.append(("run", q, paged_kv_cache, args, out, lse, return_lse))
        return ("decode", self.planned, q.shape, return_lse)


class BatchPrefillWithPagedKVCacheWrapper(_Base):
    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
             num_qo_heads, num_kv_heads, head_dim_qk, page_size, head_dim_vo=None,
             custom_mask=None, packed_custom_mask=None, causal=False, pos_encoding_mode="NONE",
             sm_scale=None):
        self.planned = (num_qo_heads, num_kv_heads, head_dim_qk, page_size, causal)

    def run(self, q, paged_kv_cache, *args, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False):
        return ("paged_prefill", self.planned, q.shape)


class BatchPrefillWithRaggedKVCacheWrapper(_Base):
    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk,
             head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             sm_scale=None):
        self.planned = (num_qo_heads, num_kv_heads, head_dim_qk, causal)

    def run(self, q, k, v, *args, out=None, lse=None, return_lse=False):
        return ("ragged", self.planned, k.shape)


class BatchMLAPagedAttentionWrapper(_Base):
    def plan(self, qo_indptr, kv_indptr, kv_indices, kv_len_arr, num_heads, head_dim_ckv,
             head_dim_kpe, page_size, causal, sm_scale, q_data_type, kv_data_type):
        self.planned = (num_heads, head_dim_ckv, head_dim_kpe, page_size)

    def run(self, q_nope, q_pe, ckv_cache, kpe_cache, out=None, lse=None, return_lse=False):
        return ("mla", self.planned, q_nope.shape)
"""

ROOT_INIT = """
from .attention import (
    BatchDecodeWithPagedKVCacheWrapper,
    BatchPrefillWithPagedKVCacheWrapper,
    BatchPrefillWithRaggedKVCacheWrapper,
)
from .mla import BatchMLAPagedAttentionWrapper
"""


@pytest.fixture
def fake_flashinfer(tmp_path, monkeypatch):
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("a real FlashInfer is installed")
    pkg = tmp_path / "fake" / "flashinfer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(ROOT_INIT))
    (pkg / "attention.py").write_text(textwrap.dedent(FAKE_WRAPPERS))
    (pkg / "mla.py").write_text(
        "from .attention import BatchMLAPagedAttentionWrapper  # noqa: F401\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    yield
    get_manager().unpatch_all()
    set_runtime(None)
    set_apply_hook(None)
    for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
        del sys.modules[name]


ATTENTION_PATHS = [
    f"flashinfer.{cls}.{method}"
    for cls in (
        "BatchDecodeWithPagedKVCacheWrapper",
        "BatchPrefillWithPagedKVCacheWrapper",
        "BatchPrefillWithRaggedKVCacheWrapper",
        "BatchMLAPagedAttentionWrapper",
    )
    for method in ("plan", "run")
]


def test_targets_name_plan_and_run_of_each_wrapper():
    paths = []
    for cls in (
        GQAPagedDecodeAdapter,
        GQAPagedPrefillAdapter,
        RaggedPrefillAdapter,
        MLAPagedAdapter,
    ):
        specs = cls().targets()
        assert [s.kind for s in specs] == ["method", "method"]
        assert len({s.ctx_key for s in specs}) == 1 and specs[0].ctx_key
        paths += [s.path for s in specs]
    assert paths == ATTENTION_PATHS


def test_install_patches_the_attention_wrappers_that_exist(fake_flashinfer):
    installed = install_flashinfer_integrations()
    # the fake has no GDN or MoE entry points: those are skipped without a word
    assert installed == ATTENTION_PATHS
    import flashinfer

    assert hasattr(flashinfer.BatchDecodeWithPagedKVCacheWrapper.run, "__wrapped__")
    get_manager().unpatch_all()
    assert not hasattr(flashinfer.BatchDecodeWithPagedKVCacheWrapper.run, "__wrapped__")


def paged_decode_call(batch=2, qo=8, kv=2, d=16, ps=1, pages=6):
    plan = dict(
        indptr=torch.tensor([0, 3, pages]),
        indices=torch.arange(pages),
        last_page_len=torch.ones(batch, dtype=torch.int32),
        num_qo_heads=qo,
        num_kv_heads=kv,
        head_dim=d,
        page_size=ps,
    )
    q = torch.randn(batch, qo, d)
    cache = (torch.randn(pages, ps, kv, d), torch.randn(pages, ps, kv, d))
    return plan, q, cache


def test_decode_miss_runs_flashinfer_with_the_same_arguments(fake_flashinfer):
    install_flashinfer_integrations()
    import flashinfer

    seen = []
    set_apply_hook(lambda name, kw: seen.append((name, sorted(kw), kw["sm_scale"])))
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    plan, q, cache = paged_decode_call()
    wrapper.plan(**plan)
    out_buf = torch.empty(2, 8, 16)
    result = wrapper.run(q, cache, "extra", out=out_buf, return_lse=True)
    # no runtime, no such definition: FlashInfer's result, from a call with the same arguments
    assert result == ("decode", (8, 2, 16, 1), q.shape, True)
    call = wrapper.calls[-1]
    assert call[1] is q and call[2] is cache and call[3] == ("extra",) and call[4] is out_buf
    # the call was seen under the name its plan gives, with the definition's inputs
    assert seen == [
        (
            "gqa_paged_decode_h8_kv2_d16_ps1",
            ["k_cache", "kv_indices", "kv_indptr", "q", "sm_scale", "v_cache"],
            pytest.approx(1 / 4),
        )
    ]


def test_plan_state_is_kept_per_instance(fake_flashinfer):
    install_flashinfer_integrations()
    import flashinfer

    names = []
    set_apply_hook(lambda name, kw: names.append((name, kw["sm_scale"])))
    a = flashinfer.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    b = flashinfer.BatchDecodeWithPagedKVCacheWrapper(None, "HND")
    plan_a, q_a, cache_a = paged_decode_call(qo=8, kv=2, d=16, ps=1)
    plan_b, q_b, _ = paged_decode_call(qo=4, kv=4, d=8, ps=4)
    a.plan(**plan_a)
    b.plan(**plan_b, sm_scale=0.5)
    cache_b = torch.randn(6, 2, 4, 4, 8)  # one tensor [pages, 2, heads, page, dim] (HND)
    assert b.run(q_b, cache_b)[1] == (4, 4, 8, 4)
    assert a.run(q_a, cache_a)[1] == (8, 2, 16, 1)
    assert names == [
        ("gqa_paged_decode_h4_kv4_d8_ps4", 0.5),
        ("gqa_paged_decode_h8_kv2_d16_ps1", 0.25),
    ]
    # a wrapper that was never planned is not routed at all
    c = flashinfer.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    c.planned = "set by hand"
    assert c.run(q_a, cache_a)[1] == "set by hand" and len(names) == 2


def test_routed_decode_writes_into_the_callers_buffers(fake_flashinfer, monkeypatch):
    import fib_core.integration.flashinfer.adapters.plan_run as plan_run

    got = {}

    def fake_route(name, kwargs, orig, args, kw):
        got.update(kwargs)
        return True, (torch.full((2, 8, 16), 3.0), torch.full((2, 8), 9.0))

    monkeypatch.setattr(plan_run, "route_or_call", fake_route)
    install_flashinfer_integrations()
    import flashinfer

    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(None, "HND")
    plan, q, _ = paged_decode_call()
    wrapper.plan(**plan)
    k_hnd, v_hnd = torch.randn(6, 2, 1, 16), torch.randn(6, 2, 1, 16)
    out_buf, lse_buf = torch.zeros(2, 8, 16), torch.zeros(2, 8)
    out, lse = wrapper.run(q, (k_hnd, v_hnd), out=out_buf, lse=lse_buf, return_lse=True)
    assert out is out_buf and lse is lse_buf and wrapper.calls == []
    assert out.unique().tolist() == [3.0] and lse.unique().tolist() == [9.0]
    # the definition sees the cache in NHD order
    assert got["k_cache"].shape == (6, 1, 2, 16) and torch.equal(
        got["v_cache"][:, 0], v_hnd[:, :, 0]
    )
    assert isinstance(wrapper.run(q, (k_hnd, v_hnd)), torch.Tensor)  # no lse asked for


def test_prefill_ragged_and_mla_names_and_fallbacks(fake_flashinfer):
    install_flashinfer_integrations()
    import flashinfer

    seen = []
    set_apply_hook(lambda name, kw: seen.append((name, sorted(kw))))
    indptr = torch.tensor([0, 3, 5])
    paged = flashinfer.BatchPrefillWithPagedKVCacheWrapper(None, "NHD")
    paged.plan(
        indptr, torch.tensor([0, 2, 4]), torch.arange(4), torch.ones(2), 8, 2, 16, 1, causal=True
    )
    q = torch.randn(5, 8, 16)
    cache = (torch.randn(4, 1, 2, 16), torch.randn(4, 1, 2, 16))
    assert paged.run(q, cache) == ("paged_prefill", (8, 2, 16, 1, True), q.shape)

    ragged = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    ragged.plan(indptr, torch.tensor([0, 4, 9]), 8, 2, 16)
    k = torch.randn(9, 2, 16)
    assert ragged.run(q, k, k.clone()) == ("ragged", (8, 2, 16, False), k.shape)

    mla = flashinfer.BatchMLAPagedAttentionWrapper(None)
    mla.plan(
        torch.tensor([0, 1, 2]),
        torch.tensor([0, 3, 5]),
        torch.arange(5),
        torch.tensor([3, 2]),
        16,
        64,
        32,
        1,
        False,
        0.1,
        "bf16",
        "bf16",
    )
    q_nope, q_pe = torch.randn(2, 16, 64), torch.randn(2, 16, 32)
    assert mla.run(q_nope, q_pe, torch.randn(5, 1, 64), torch.randn(5, 1, 32))[1] == (16, 64, 32, 1)
    mla.plan(
        indptr,
        torch.tensor([0, 3, 5]),
        torch.arange(5),
        torch.tensor([3, 2]),
        16,
        64,
        32,
        1,
        True,
        0.1,
        "bf16",
        "bf16",
    )
    mla.run(
        torch.randn(5, 16, 64), torch.randn(5, 16, 32), torch.randn(5, 1, 64), torch.randn(5, 1, 32)
    )
    assert [name for name, _ in seen] == [
        "gqa_paged_prefill_causal_h8_kv2_d16_ps1",
        "gqa_ragged_prefill_h8_kv2_d16",
        "mla_paged_decode_h16_ckv64_kpe32_ps1",
        "mla_paged_prefill_causal_h16_ckv64_kpe32_ps1",
    ]
    assert "qo_indptr" not in seen[2][1] and "qo_indptr" in seen[3][1]
    # options the definitions do not express are not routed (the hook sees nothing)
    paged.plan(
        indptr,
        torch.tensor([0, 2, 4]),
        torch.arange(4),
        torch.ones(2),
        8,
        2,
        16,
        1,
        pos_encoding_mode="ROPE_LLAMA",
    )
    assert paged.run(q, cache)[0] == "paged_prefill" and len(seen) == 4


def test_layout_detection_and_normalisation():
    nhd = torch.arange(3 * 4 * 2 * 5, dtype=torch.float32).reshape(3, 4, 2, 5)  # ps 4, heads 2
    hnd = nhd.transpose(1, 2).contiguous()
    assert infer_paged_kv_layout_from_tensors(nhd, 2) == "NHD"
    assert infer_paged_kv_layout_from_tensors((hnd, hnd), 2) == "HND"
    assert infer_paged_kv_layout_from_tensors(torch.stack([hnd, hnd], 1), 2) == "HND"
    assert infer_paged_kv_layout_from_tensors(torch.zeros(3, 2, 2, 5), 2) is None  # ambiguous
    assert infer_paged_kv_layout_from_tensors(torch.zeros(3, 5), 2) is None
    assert torch.equal(normalize_paged_kv_to_nhd(hnd, "HND"), nhd)
    k, v = normalize_paged_kv_to_nhd((hnd, hnd * 2), "hnd")
    assert torch.equal(k, nhd) and torch.equal(v, nhd * 2)
    both = normalize_paged_kv_to_nhd(torch.stack([hnd, hnd], 1), "HND")
    assert torch.equal(both[:, 1], nhd)
    assert normalize_paged_kv_to_nhd(nhd, "NHD") is nhd

    tokens = torch.randn(7, 2, 5)
    assert infer_ragged_kv_layout_from_tensors(tokens, 2) == "NHD"
    assert infer_ragged_kv_layout_from_tensors(tokens.transpose(0, 1), 2) == "HND"
    assert infer_ragged_kv_layout_from_tensors(torch.zeros(2, 2, 5), 2) is None
    assert torch.equal(normalize_ragged_kv_to_nhd(tokens.transpose(0, 1), "HND"), tokens)
    with pytest.raises(ValueError, match="kv_layout"):
        normalize_ragged_kv_to_nhd(tokens, "NDH")

    class W:
        _kv_layout = "HND"

    assert infer_kv_layout_from_args(W()) == "HND"
    assert infer_kv_layout_from_args(object()) is None


def test_sm_scale_pickers():
    assert pick_sm_scale_gqa(128, None) == pytest.approx(1 / math.sqrt(128))
    assert pick_sm_scale_gqa(128, 0.3) == 0.3
    assert pick_sm_scale_mla(128, 64, None) == pytest.approx(1 / math.sqrt(192))
    assert pick_sm_scale_mla(512, 64, torch.tensor(0.25)) == 0.25
    with pytest.raises(ValueError):
        pick_sm_scale_gqa(0, None)


def test_write_back_outputs():
    output, lse = torch.full((2, 3), 1.5), torch.full((2,), -2.0)
    assert write_back_outputs(output=output, lse=lse, want_lse=False) is output
    out_buf, lse_buf = torch.zeros(2, 3), torch.zeros(2)
    got_out, got_lse = write_back_outputs(
        output=output, lse=lse, want_lse=True, out_buf=out_buf, lse_buf=lse_buf
    )
    assert got_out is out_buf and got_lse is lse_buf
    assert torch.equal(out_buf, output) and torch.equal(lse_buf, lse)
    got = write_back_outputs(output=output, lse=lse, want_lse=False, out_buf=torch.zeros(2, 3))
    assert isinstance(got, torch.Tensor) and torch.equal(got, output)


def test_a_plan_the_adapter_cannot_read_still_runs_flashinfer(fake_flashinfer):
    """A FlashInfer whose plan() names its arguments differently: plan and run stay FlashInfer's."""
    import flashinfer

    cls = flashinfer.BatchDecodeWithPagedKVCacheWrapper

    def renamed_plan(
        self, kv_indptr, kv_indices, kv_last, num_qo_heads, num_kv_heads, head_dim, page_size
    ):
        self.planned = ("renamed", num_qo_heads)

    cls.plan = renamed_plan
    install_flashinfer_integrations()
    seen = []
    set_apply_hook(lambda name, kw: seen.append(name))
    wrapper = cls(None, "NHD")
    plan, q, cache = paged_decode_call()
    wrapper.plan(plan["indptr"], plan["indices"], plan["last_page_len"], 8, 2, 16, 1)
    assert wrapper.run(q, cache)[1] == ("renamed", 8) and seen == []
