"""The fast GDN prefill references against the token-by-token one they replace for checks.

CPU: the batched form on hand-made packings (empty sequences, no initial state, one token
each) and the embedded workloads of at most 32 tokens, bit for bit. GPU: the batched and the
Triton form on every embedded workload, on the kit's own inputs, and the Triton form on the
hand-made packings.
"""

from __future__ import annotations

import pytest
import torch

from fib_core.bench.evaluation.check import check_outputs
from fib_core.bench.evaluation.inputs import generate_inputs
from fib_core.bench.evaluation.reference import fast_reference_for
from fib_core.bench.evaluation.tolerance import resolve_tolerance
from fib_core.data.traceset import TraceSet
from fib_core.dataset import embedded_dataset_path, registry
from fib_core.dataset.references import reference_run

GDN_PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
# The definition folder's fast_reference.py, loaded as the engine loads it.
_FAST = registry.get(GDN_PREFILL).module("fast_reference")
gdn_prefill_batched = _FAST.gdn_prefill_batched
gdn_prefill_recurrent = _FAST.gdn_prefill_recurrent

CPU_MAX_TOKENS = 32


@pytest.fixture(scope="module")
def prefill():
    ts = TraceSet.from_path(embedded_dataset_path())
    definition = ts.definitions[GDN_PREFILL]
    return ts, definition, reference_run(definition)


def _agree(loop_out, fast_out, exact: bool) -> None:
    (o1, s1), (o2, s2) = loop_out, fast_out
    assert o1.dtype == o2.dtype == torch.bfloat16 and s1.dtype == s2.dtype == torch.float32
    if exact:
        assert torch.equal(o1, o2) and torch.equal(s1, s2)
    else:  # a GPU may order a batched product's sums differently: rounding only
        torch.testing.assert_close(s2, s1, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(o2.float(), o1.float(), rtol=1.6e-2, atol=1e-5)


def _packed(lengths: list[int], with_state: bool, scale: float, seed: int = 0) -> list:
    gen = torch.Generator().manual_seed(seed)
    total, n = sum(lengths), len(lengths)

    def bf16(*shape):
        return torch.randn(*shape, generator=gen).bfloat16()

    def unit_rows(*shape):  # normalised q and k, as the model feeds them (raw N(0, 1) keys
        rows = torch.randn(*shape, generator=gen)  # make the recurrence blow up)
        return (rows / rows.norm(dim=-1, keepdim=True)).bfloat16()

    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    state = torch.randn(n, 8, 128, 128, generator=gen) / 128**0.5 if with_state else None
    return [
        unit_rows(total, 4, 128),
        unit_rows(total, 4, 128),
        bf16(total, 8, 128),
        state,
        torch.randn(8, generator=gen),
        bf16(total, 8),
        torch.randn(8, generator=gen),
        bf16(total, 8),
        cu,
        scale,
    ]


@pytest.mark.parametrize(
    ("lengths", "with_state", "scale"),
    [
        ([5], True, 0.0),
        ([3, 0, 7, 1], True, 0.0),
        ([4, 9, 2], False, 0.125),
        ([1, 1, 1], True, 0.0),
        ([0, 0], True, 0.0),
    ],
)
def test_matches_the_loop_on_hand_made_packings(prefill, lengths, with_state, scale) -> None:
    _, _, loop = prefill
    args = _packed(lengths, with_state, scale)
    _agree(loop(*args), gdn_prefill_batched(*args), exact=True)


def test_registered_for_the_prefill_definition_and_batched_off_the_gpu(prefill) -> None:
    fast = fast_reference_for(GDN_PREFILL)
    assert fast is not None and fast is not gdn_prefill_batched
    assert fast_reference_for("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64") is None
    _, _, loop = prefill
    args = _packed([3, 0, 7, 1], True, 0.0, seed=3)
    _agree(loop(*args), fast(*args), exact=True)  # CPU tensors: the batched form, exactly


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("lengths", "with_state", "scale"),
    [([5], True, 0.0), ([3, 0, 7, 1], True, 0.0), ([4, 9, 2], False, 0.125), ([0, 0], True, 0.0)],
)
def test_triton_form_matches_the_loop_on_hand_made_packings(
    prefill, lengths, with_state, scale
) -> None:
    _, _, loop = prefill
    args = [a.cuda() if torch.is_tensor(a) else a for a in _packed(lengths, with_state, scale)]
    got = gdn_prefill_recurrent(*args)
    _agree(loop(*args), got, exact=False)
    chosen = fast_reference_for(GDN_PREFILL)(*args)  # CUDA tensors: the Triton form
    assert all(torch.equal(x, y) for x, y in zip(chosen, got, strict=True))


def _embedded_cases(prefill, device: str, max_tokens: int | None):
    ts, definition, _ = prefill
    for record in ts.workloads[GDN_PREFILL]:
        workload = record.workload
        if max_tokens is not None and workload.axes["total_seq_len"] > max_tokens:
            continue
        yield (
            workload,
            generate_inputs(definition, workload, seed=0, device=device, dataset_root=ts.root),
        )


def test_matches_the_loop_on_small_embedded_workloads(prefill) -> None:
    _, _, loop = prefill
    cases = list(_embedded_cases(prefill, "cpu", CPU_MAX_TOKENS))
    assert len(cases) >= 8
    for _, args in cases:
        _agree(loop(*args), gdn_prefill_batched(*args), exact=True)


@pytest.mark.gpu
def test_matches_the_loop_on_every_embedded_workload_on_gpu(prefill) -> None:
    _, definition, loop = prefill
    tol = resolve_tolerance(definition)
    count = 0
    for workload, args in _embedded_cases(prefill, "cuda", None):
        want = loop(*args)
        for fast in (gdn_prefill_batched, gdn_prefill_recurrent):
            got = fast(*args)
            nans = [int(torch.isnan(t.float()).sum()) for t in (*want, *got)]
            nans_in = [int(torch.isnan(a.float()).sum()) for a in args if torch.is_tensor(a)]
            assert not any(nans), (workload.axes, fast.__name__, "NaN in loop out/state, fast "
                                   "out/state", nans, "NaN in the inputs", nans_in)
            _agree(want, got, exact=False)
            verdict = check_outputs(definition, list(got), list(want), tolerance=tol, inputs=args)
            assert verdict.passed, (workload.axes, fast.__name__, verdict.message)
        count += 1
    assert count == 100


# --- GDN decode ----------------------------------------------------------------------------

GDN_DECODE = "gdn_decode_qk4_v8_d128_k_last"


@pytest.fixture(scope="module")
def decode():
    ts = TraceSet.from_path(embedded_dataset_path())
    definition = ts.definitions[GDN_DECODE]
    return ts, definition, reference_run(definition), fast_reference_for(GDN_DECODE)


def _decode_cases(decode, device: str, max_batch: int | None):
    ts, definition, _, _ = decode
    for record in ts.workloads[GDN_DECODE]:
        workload = record.workload
        if max_batch is not None and workload.axes["batch_size"] > max_batch:
            continue
        yield workload, generate_inputs(
            definition, workload, seed=0, device=device, dataset_root=ts.root
        )


def _decode_agree(decode, device: str, max_batch: int | None) -> int:
    _, definition, loop, fast = decode
    tol = resolve_tolerance(definition)
    count = 0
    for workload, args in _decode_cases(decode, device, max_batch):
        want, got = loop(*args), fast(*args)
        assert [t.shape for t in got] == [t.shape for t in want], workload.axes
        _agree(want, got, exact=False)
        verdict = check_outputs(definition, list(got), list(want), tolerance=tol, inputs=args)
        assert verdict.passed, (workload.axes, verdict.message)
        count += 1
    return count


def test_decode_fast_reference_matches_the_loop_on_small_batches(decode) -> None:
    assert decode[3] is not None
    assert _decode_agree(decode, "cpu", 4) >= 10


def test_decode_fast_reference_without_a_state_starts_from_zeros(decode) -> None:
    _, _, loop, fast = decode
    args = next(_decode_cases(decode, "cpu", 1))[1]
    args[3] = None
    _agree(loop(*args), fast(*args), exact=False)


@pytest.mark.gpu
def test_decode_fast_reference_matches_the_loop_on_every_embedded_workload_on_gpu(decode):
    assert _decode_agree(decode, "cuda", None) == 54


def test_the_triton_form_names_the_shapes_it_takes() -> None:
    args = _packed([3, 2], True, 0.0)  # CPU tensors: run() takes the batched form instead
    with pytest.raises(ValueError, match="CUDA tensors with a power-of-two key size"):
        gdn_prefill_recurrent(*args)
