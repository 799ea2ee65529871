"""The gated delta net starters (Triton decode, Triton chunked prefill, CUDA decode).

CPU runs go through Triton's interpreter with small shapes (the kernels take head counts and
sizes from the tensors); GPU runs check every real workload shape of both definitions against
the kit's references with the organizers' tolerance (atol = rtol = 1e-2, every element).

A plain torch version of the recurrence lives here too (``naive_decode``/``naive_prefill``): it
handles any head counts (the kit's references are written for the contest's 4/8/128 heads)
and runs all sequences of a batch in lockstep, so the GPU tests stay fast. One test checks it
against the kit's references, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import importlib.util
import inspect
import math
import os
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[2]
DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
DECODE_DIR = REPO / "starters" / DECODE
PREFILL_DIR = REPO / "starters" / PREFILL

ATOL = RTOL = 1e-2  # the organizers' default: every element must pass
SCALE = 1.0 / math.sqrt(128)

# Real workload axes (from the contest's workload list): decode batch sizes, and the distinct
# (total_seq_len, num_seqs) pairs of prefill.
DECODE_BATCHES = [1, 4, 8, 16, 32, 48, 64]
PREFILL_SHAPES = [
    (6, 1), (134, 1), (8192, 32), (8192, 34), (4124, 15), (8192, 25), (8192, 48), (8192, 38),
    (8192, 20), (8192, 56), (8192, 37), (8192, 35), (8192, 43), (8192, 57), (8192, 39),
    (3999, 13), (32, 2), (16, 1), (40, 2), (49, 1), (1377, 1), (3271, 2), (983, 2), (46, 2),
    (202, 3), (239, 3), (294, 3), (91, 2), (132, 2), (341, 2), (2107, 1), (1592, 3), (139, 3),
    (116, 1), (185, 2), (81, 2), (82, 3), (1800, 3), (35, 2), (3028, 5), (61, 1), (35, 1),
    (461, 2), (832, 4), (2857, 3), (30, 1), (114, 2), (31, 1), (255, 3), (24, 1), (97, 1),
    (574, 2), (92, 1), (85, 2), (79, 1), (401, 4), (12, 1), (18, 1), (1796, 3), (973, 3),
    (248, 2), (2040, 2), (48, 1), (118, 2), (76, 2), (67, 1), (68, 1), (13, 1), (525, 1),
    (5709, 2), (14, 1), (661, 3), (959, 4), (28, 2), (42, 2), (2284, 3), (23, 1),
]

DECODE_INPUTS = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "scale")
PREFILL_INPUTS = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "scale")
OUTPUTS = ("output", "new_state")


# --- loading the starters --------------------------------------------------------------------


def load_triton_starter(starter_dir: Path, package: str | None = None):
    """Import ``<starter_dir>/kernel.py`` as a module of a package, as the kit's builder does
    (the prefill starter's files use relative imports). ``package`` names it when another copy
    of a starter must load beside the kit's own (e.g. an older commit's, to time both)."""
    pkg = package or "gdn_starter_" + starter_dir.parent.name
    if pkg not in sys.modules:
        spec = importlib.machinery.ModuleSpec(pkg, None, is_package=True)
        spec.submodule_search_locations = [str(starter_dir)]
        sys.modules[pkg] = importlib.util.module_from_spec(spec)
    loaded_from = Path(sys.modules[pkg].__spec__.submodule_search_locations[0])
    if loaded_from.resolve() != starter_dir.resolve():  # the cache would return another copy
        raise ValueError(f"package {pkg} is already loaded from {loaded_from}, not {starter_dir}: "
                         "pass another package name for this copy")
    return importlib.import_module(f"{pkg}.kernel")


def find_cuda_home() -> str | None:
    """A CUDA toolkit folder holding nvcc and libcudart (the tvm-ffi build links both)."""
    candidates = [os.environ.get("CUDA_HOME", "")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parents[1]))
    candidates += sorted(str(p) for p in Path("/usr/local").glob("cuda*"))
    for cand in candidates:
        root = Path(cand) if cand else None
        if root and (root / "bin" / "nvcc").exists() and any(
            (root / lib / "libcudart.so").exists() for lib in ("lib64", "lib")
        ):
            return str(root)
    return None


def build_cuda_starter(build_dir: Path, arch: str | None = None):
    """Compile the CUDA decode starter with tvm-ffi and return its ``run`` function."""
    tvm_ffi_cpp = pytest.importorskip(
        "tvm_ffi.cpp", reason="apache-tvm-ffi is not installed (pip install -e '.[cuda]')")
    cuda_home = find_cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit (nvcc + libcudart) found")
    os.environ.setdefault("CUDA_HOME", cuda_home)
    if arch:
        os.environ["TVM_FFI_CUDA_ARCH_LIST"] = arch
    module = tvm_ffi_cpp.load(
        "gdn_decode_cuda_starter",
        sources=[str(DECODE_DIR / "cuda" / "kernel.cu")],
        build_directory=str(build_dir),
    )
    return module.run


# --- plain references ------------------------------------------------------------------------


def gates(a_log, dt_bias, a, b):
    """(g, beta) in fp32, broadcast over the leading axes of a and b."""
    g = torch.exp(-torch.exp(a_log.float()) * F.softplus(a.float() + dt_bias.float()))
    return g, torch.sigmoid(b.float())


def naive_decode(q, k, v, state, A_log, a, dt_bias, b, scale):
    """One delta-rule step for every request and head at once (fp32), any head counts."""
    q, k, v = q[:, 0].float(), k[:, 0].float(), v[:, 0].float()
    group = v.shape[1] // q.shape[1]
    q, k = q.repeat_interleave(group, 1), k.repeat_interleave(group, 1)
    if not scale:
        scale = 1.0 / math.sqrt(q.shape[-1])
    g, beta = gates(A_log, dt_bias, a[:, 0], b[:, 0])
    s = torch.zeros(*v.shape, q.shape[-1], device=q.device) if state is None else state.float()
    s = s * g[..., None, None]
    u = beta[..., None] * (v - torch.einsum("bhvk,bhk->bhv", s, k))
    s = s + u[..., None] * k[:, :, None, :]
    out = scale * torch.einsum("bhvk,bhk->bhv", s, q)
    return out[:, None].to(torch.bfloat16), s


def naive_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """The token-by-token recurrence, all sequences in lockstep (padded), any head counts.

    An empty sequence leaves a zero state, as the kit's and the contest's references do.
    """
    total, hq, dk = q.shape
    hv, dv = v.shape[1], v.shape[2]
    group = hv // hq
    if not scale:
        scale = 1.0 / math.sqrt(dk)
    bounds = cu_seqlens.tolist()
    n = len(bounds) - 1
    lens = [bounds[i + 1] - bounds[i] for i in range(n)]
    steps = max(lens, default=0)
    g, beta = gates(A_log, dt_bias, a, b)  # [T, HV]
    qe = q.float().repeat_interleave(group, 1)
    ke = k.float().repeat_interleave(group, 1)
    s = torch.zeros(n, hv, dv, dk, device=q.device) if state is None else state.float().clone()
    out = torch.zeros(total, hv, dv, device=q.device)
    starts = torch.tensor(bounds[:-1], device=q.device)
    length = torch.tensor(lens, device=q.device)
    for t in range(steps):
        live = t < length  # [N]
        tok = torch.where(live, starts + t, 0)
        gt = torch.where(live[:, None], g[tok], 1.0)[..., None, None]
        bt = torch.where(live[:, None], beta[tok], 0.0)[..., None]
        kt, qt, vt = ke[tok], qe[tok], v[tok].float()
        s = s * gt
        u = bt * (vt - torch.einsum("nhvk,nhk->nhv", s, kt))
        s = s + u[..., None] * kt[:, :, None, :]
        o = scale * torch.einsum("nhvk,nhk->nhv", s, qt)
        out[tok[live]] = o[live]
    s[length == 0] = 0.0
    return out.to(torch.bfloat16), s


def kit_reference(definition: str):
    """The kit's own reference ``run`` (the one the benchmark engine grades against)."""
    from fib_core.dataset.references import load_reference

    return load_reference(definition)["run"]


# --- inputs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heads:
    qk: int = 4
    v: int = 8
    k_dim: int = 128
    v_dim: int = 128


REAL = Heads()
QK16_V32 = Heads(16, 32, 128, 128)
SMALL = Heads(4, 8, 32, 32)  # the real head counts at a size the interpreter runs quickly


def _randn(shape, gen, device, dtype=torch.float32):
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _unit_rows(shape, gen, device):
    x = torch.randn(shape, generator=gen)
    return (x / x.norm(dim=-1, keepdim=True)).to(torch.bfloat16).to(device)


def _gate_params(heads: Heads, gen, device):
    # Decay rates in the model's range (A in [1, 16], dt in [1e-3, 1e-1]): gates mostly 0.3..1.
    a_log = torch.log(1 + 15 * torch.rand(heads.v, generator=gen))
    dt = torch.exp(math.log(1e-3) + torch.rand(heads.v, generator=gen) * math.log(100.0))
    return a_log.to(device), (dt + torch.log(-torch.expm1(-dt))).to(device)


def decode_inputs(batch: int, heads: Heads = REAL, *, seed=0, device="cpu", with_state=True,
                  unit_keys=True, scale=SCALE) -> list:
    """Inputs in the definition's order. Keys have unit rows as in the model (raw N(0, 1) keys
    are fine for one step too: ``unit_keys=False`` checks that)."""
    gen = torch.Generator().manual_seed(seed)
    make_keys = _unit_rows if unit_keys else (lambda s, g, d: _randn(s, g, d, torch.bfloat16))
    q = _unit_rows((batch, 1, heads.qk, heads.k_dim), gen, device)
    k = make_keys((batch, 1, heads.qk, heads.k_dim), gen, device)
    v = _randn((batch, 1, heads.v, heads.v_dim), gen, device, torch.bfloat16)
    state = _randn((batch, heads.v, heads.v_dim, heads.k_dim), gen, device) / math.sqrt(heads.k_dim)
    a_log, dt_bias = _gate_params(heads, gen, device)
    a = _randn((batch, 1, heads.v), gen, device, torch.bfloat16)
    b = _randn((batch, 1, heads.v), gen, device, torch.bfloat16)
    return [q, k, v, state if with_state else None, a_log, a, dt_bias, b, scale]


def split_lengths(total: int, num_seqs: int, gen) -> list[int]:
    """``num_seqs`` non-empty lengths adding up to ``total``, uneven, the first short."""
    if num_seqs == 1:
        return [total]
    first = 1 + int(torch.randint(0, min(63, total - num_seqs + 1), (1,), generator=gen))
    rest = total - first
    w = torch.rand(num_seqs - 1, generator=gen) + 0.2
    cuts = (w.cumsum(0) / w.sum() * rest).floor().long().tolist()
    lens = [cuts[0]] + [cuts[i] - cuts[i - 1] for i in range(1, len(cuts))]
    lens[-1] += rest - sum(lens)
    out = [first] + lens
    for i in range(1, len(out)):  # make every length >= 1 by borrowing from the longest
        while out[i] < 1:
            j = max(range(len(out)), key=lambda x: out[x])
            out[j] -= 1
            out[i] += 1
    return out


def prefill_inputs(lengths: list[int], heads: Heads = REAL, *, seed=0, device="cpu",
                   with_state=True, scale=SCALE) -> list:
    gen = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    q = _unit_rows((total, heads.qk, heads.k_dim), gen, device)
    k = _unit_rows((total, heads.qk, heads.k_dim), gen, device)
    v = _randn((total, heads.v, heads.v_dim), gen, device, torch.bfloat16)
    n = len(lengths)
    state = _randn((n, heads.v, heads.v_dim, heads.k_dim), gen, device) / math.sqrt(heads.k_dim)
    a_log, dt_bias = _gate_params(heads, gen, device)
    a = _randn((total, heads.v), gen, device, torch.bfloat16)
    b = _randn((total, heads.v), gen, device, torch.bfloat16)
    return [q, k, v, state if with_state else None, a_log, a, dt_bias, b, cu.to(device), scale]


def empty_outputs(inputs: list, prefill: bool) -> list:
    """Outputs poisoned with NaN, so an element the kernel never writes fails the check."""
    v, q = inputs[2], inputs[0]
    n = inputs[8].numel() - 1 if prefill else q.shape[0]
    out = torch.full(v.shape, float("nan"), dtype=torch.bfloat16, device=v.device)
    state = torch.full((n, v.shape[-2], v.shape[-1], q.shape[-1]), float("nan"), device=v.device)
    return [out, state]


# --- checking --------------------------------------------------------------------------------


def assert_matches(name: str, got: torch.Tensor, want: torch.Tensor, atol=ATOL, rtol=RTOL):
    """The organizers' rule: an element fails when both its absolute and relative errors are
    over tolerance; every element must pass, and NaN/inf in the result always fails."""
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
    x, y = got.float(), want.float()
    assert torch.isfinite(x).all(), f"{name}: {int((~torch.isfinite(x)).sum())} non-finite values"
    err = (x - y).abs()
    bad = (err > atol) & (err > rtol * y.abs())
    if bad.any():
        idx = tuple(int(i) for i in bad.nonzero()[0])
        worst = int(err.flatten().argmax())
        raise AssertionError(
            f"{name}: {int(bad.sum())}/{bad.numel()} elements off; first at {idx}: "
            f"{x[idx].item():.5g} vs {y[idx].item():.5g}; max abs error {err.max().item():.3g} "
            f"at flat index {worst}"
        )


def check(run, reference, inputs: list, prefill: bool) -> None:
    outputs = empty_outputs(inputs, prefill)
    run(*inputs, *outputs)
    want = reference(*inputs)
    for name, got, ref in zip(OUTPUTS, outputs, want, strict=True):
        assert_matches(name, got, ref)


# --- CPU: the Triton kernels through the interpreter ------------------------------------------


def test_naive_references_agree_with_the_kit_references():
    dec = decode_inputs(3, seed=1)
    for got, want in zip(naive_decode(*dec), kit_reference(DECODE)(*dec), strict=True):
        assert_matches("decode", got, want, atol=1e-4, rtol=1e-4)
    pre = prefill_inputs([5, 0, 9], seed=2)
    for got, want in zip(naive_prefill(*pre), kit_reference(PREFILL)(*pre), strict=True):
        assert_matches("prefill", got, want, atol=1e-3, rtol=1e-3)


def test_triton_decode_quick_real_shape():
    check(load_triton_starter(DECODE_DIR / "triton").run, kit_reference(DECODE),
          decode_inputs(1, seed=1), prefill=False)


def test_triton_decode_without_state_and_default_scale():
    inputs = decode_inputs(2, SMALL, seed=3, with_state=False, scale=0.0)
    check(load_triton_starter(DECODE_DIR / "triton").run, naive_decode, inputs, prefill=False)


def test_triton_decode_raw_gaussian_keys():
    inputs = decode_inputs(2, SMALL, seed=4, unit_keys=False)
    check(load_triton_starter(DECODE_DIR / "triton").run, naive_decode, inputs, prefill=False)


@pytest.mark.parametrize("heads", [Heads(16, 32, 32, 32), Heads(2, 2, 48, 24)],
                         ids=["qk16_v32", "odd_sizes"])
def test_triton_decode_other_head_counts(heads):
    check(load_triton_starter(DECODE_DIR / "triton").run, naive_decode,
          decode_inputs(1, heads, seed=5), prefill=False)


def test_triton_decode_rejects_more_than_one_token():
    inputs = decode_inputs(1)
    inputs[0] = inputs[0].expand(1, 2, *inputs[0].shape[2:])
    with pytest.raises(ValueError, match="one token"):
        load_triton_starter(DECODE_DIR / "triton").run(*inputs, *empty_outputs(inputs, False))


@pytest.mark.parametrize("lengths", [[6], [12, 20]], ids=["T6", "T32_N2"])
def test_triton_prefill_quick_real_shapes(lengths):
    check(load_triton_starter(PREFILL_DIR / "triton").run, kit_reference(PREFILL),
          prefill_inputs(lengths, seed=len(lengths)), prefill=True)


def test_triton_prefill_multi_chunk_sequences_small_heads():
    # Sequences across chunk boundaries (64), exactly one chunk, a single token, and empty.
    heads = Heads(2, 4, 32, 32)
    inputs = prefill_inputs([5, 64, 1, 0, 139], heads, seed=7)
    check(load_triton_starter(PREFILL_DIR / "triton").run, naive_prefill, inputs, prefill=True)


def test_triton_prefill_sequences_of_equal_length_in_any_order():
    # Stage 2 takes the sequences longest first (ties by position): equal lengths, a longer
    # one last and an empty one must each still get exactly one walk.
    heads = Heads(1, 2, 16, 16)
    inputs = prefill_inputs([70, 3, 70, 0, 3, 130], heads, seed=5)
    check(load_triton_starter(PREFILL_DIR / "triton").run, naive_prefill, inputs, prefill=True)


PREFILL_PATHS = pytest.mark.parametrize("token_scan", [True, False],
                                        ids=["token-by-token", "chunked"])


def prefill_on_path(monkeypatch, token_scan: bool, **settings):
    """The prefill starter's module with every call sent token by token or through the chunks,
    whatever its cut-over would choose (for as long as the test runs); ``settings`` replace
    other fields of its launch configuration."""
    mod = load_triton_starter(PREFILL_DIR / "triton")
    default = mod.launch_config
    monkeypatch.setattr(mod, "launch_config", lambda *a, **k: dataclasses.replace(
        default(*a, **k), token_scan=token_scan, **settings))
    return mod


def test_triton_prefill_more_sequences_than_stage_2_ranks(monkeypatch):
    # Past LONGEST_FIRST_MAX_SEQS sequences stage 2 walks them in the batch's order; every
    # sequence must still be walked once.
    limit = load_triton_starter(PREFILL_DIR / "triton").LONGEST_FIRST_MAX_SEQS
    mod = prefill_on_path(monkeypatch, False)
    assert mod.launch_config(8192, limit, 8, 128).scan_longest_first
    assert not mod.launch_config(8192, limit + 1, 8, 128).scan_longest_first
    lengths = [1 + (7 * i) % 5 for i in range(limit + 3)]
    inputs = prefill_inputs(lengths, Heads(1, 2, 16, 16), seed=6)
    check(mod.run, naive_prefill, inputs, prefill=True)


_SEQUENCE_OF_RANK = None  # the starter's jit helper, set by the test below before each launch


@triton.jit
def _ranks_kernel(cu_ptr, out_ptr, num_seqs, BLOCK_N: tl.constexpr, BY_LENGTH: tl.constexpr):
    rank = tl.program_id(0)
    i_n, bos, eos, chunk = _SEQUENCE_OF_RANK(cu_ptr, num_seqs, rank, 64, BLOCK_N, BY_LENGTH)
    tl.store(out_ptr + rank * 4 + 0, i_n.to(tl.int64))
    tl.store(out_ptr + rank * 4 + 1, bos)
    tl.store(out_ptr + rank * 4 + 2, eos)
    tl.store(out_ptr + rank * 4 + 3, chunk)


def test_triton_prefill_stage_2_takes_sequences_longest_first(monkeypatch):
    # Rank r walks the r-th longest sequence (ties by position), or the r-th in the batch
    # without BY_LENGTH, and starts at that sequence's first chunk in the batch's numbering.
    kernel = load_triton_starter(PREFILL_DIR / "triton")
    helper = importlib.import_module(".chunk_scan", kernel.__package__).sequence_of_rank
    monkeypatch.setattr(sys.modules[__name__], "_SEQUENCE_OF_RANK", helper)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(3)
    cases = [[0], [5], [3, 3, 3], [70, 3, 70, 0, 3, 130], [0] * 7 + [64],
             torch.randint(0, 200, (63,), generator=gen).tolist(),
              [(0, 1, 63, 64, 65, 128)[i]
              for i in torch.randint(0, 6, (40,), generator=gen).tolist()]]
    for lengths in cases:
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64,
                          device=device)
        firsts = [0, *torch.tensor([-(-n // 64) for n in lengths]).cumsum(0).tolist()]
        for by_length in (True, False):
            out = torch.full((len(lengths), 4), -1, dtype=torch.int64, device=device)
            _ranks_kernel[(len(lengths),)](cu, out, len(lengths),
                                           BLOCK_N=triton.next_power_of_2(len(lengths) + 1),
                                           BY_LENGTH=by_length)
            order = (sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)) if by_length
                     else list(range(len(lengths))))
            want = [[i, int(cu[i]), int(cu[i + 1]), firsts[i]] for i in order]
            assert out.tolist() == want, (lengths, by_length)


@PREFILL_PATHS
def test_triton_prefill_short_calls_on_either_path(token_scan, monkeypatch):
    # Short calls go token by token by default; the chunked kernels must stay right on them
    # too (a contestant may change the cut-over), and the token path on empty sequences. The
    # token path runs with the GPU's 2-row blocks too (under the interpreter it takes a
    # head's rows in one program).
    for settings in ({}, {"token_block_v": 2}) if token_scan else ({},):
        mod = prefill_on_path(monkeypatch, token_scan, **settings)
        for inputs in (prefill_inputs([5, 0, 9], Heads(2, 4, 16, 16), seed=3),
                       prefill_inputs([0, 3, 7], Heads(1, 2, 32, 16), seed=4,
                                      with_state=False)):
            check(mod.run, naive_prefill, inputs, prefill=True)


def prefill_launch_module():
    """The starter's launch.py, as its kernel.py imports it."""
    package = load_triton_starter(PREFILL_DIR / "triton").__package__
    return importlib.import_module(".launch", package)


def test_triton_prefill_launch_key_holds_what_triton_specializes_on():
    key = prefill_launch_module().specialization_key
    t = torch.zeros(8)
    base = key((t, 40, 0.5), {"BLOCK": 16, "num_warps": 4})
    assert key((t, 24, 2.0), {"BLOCK": 16, "num_warps": 4}) == base  # same class of values
    for args, kwargs in (((t[1:], 40, 0.5), {"BLOCK": 16, "num_warps": 4}),  # 4-byte offset
                         ((t.double(), 40, 0.5), {"BLOCK": 16, "num_warps": 4}),
                         ((t, 1, 0.5), {"BLOCK": 16, "num_warps": 4}),
                         ((t, 48, 0.5), {"BLOCK": 16, "num_warps": 4}),
                         ((t, 2**31 + 3, 0.5), {"BLOCK": 16, "num_warps": 4}),
                         ((t, 2**63 + 3, 0.5), {"BLOCK": 16, "num_warps": 4}),
                         ((t, True, 0.5), {"BLOCK": 16, "num_warps": 4}),
                         ((t, 40, 0.5), {"BLOCK": 32, "num_warps": 4}),
                         ((t, 40, 0.5), {"BLOCK": 16, "num_warps": 8})):
        assert key(args, kwargs) != base, (args[1:], kwargs)
    # Triton types ints as i32, i64 (also below -2**31) or u64 (from 2**63)
    assert key((t, -(2**40), 0.5), {}) != key((t, 2**63 + 16, 0.5), {})


@triton.jit
def _scaled_copy_kernel(src_ptr, dst_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n) * factor, mask=offs < n)


def test_triton_prefill_launcher_launches_as_the_kernel_would():
    # Each call must run the variant Triton would pick for its own arguments: n = 1 and a
    # multiple of 16 compile specialized variants first, which must not serve n = 40, nor
    # the 16-byte-aligned one a view 4 bytes in. On a GPU each call's cached variant is the
    # one Triton's own cache holds for those arguments, four variants in all (the repeat with
    # another factor is a hit); the CPU interpreter caches nothing.
    launch = prefill_launch_module()
    launcher = launch.Launcher(_scaled_copy_kernel)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    fast = device == "cuda" and launch.FAST_PATH
    src = torch.arange(1, 49, dtype=torch.float32, device=device)
    for view, n, factor in ((src, 1, 5.0), (src, 16, 0.5), (src, 40, 2.0), (src, 40, 3.0),
                            (src[1:], 39, 2.0)):
        dst = torch.full_like(view, -1.0)
        grid = (triton.cdiv(n, 16),)
        launcher(grid, view, dst, n, factor, BLOCK=16)
        want = torch.cat([view[:n] * factor, torch.full_like(view[n:], -1.0)])
        assert torch.equal(dst, want), (n, factor, view.data_ptr() % 16)
        if fast:
            key = launch.specialization_key((view, dst, n, factor), {"BLOCK": 16})
            triton_picks = _scaled_copy_kernel.warmup(view, dst, n, factor, BLOCK=16, grid=grid)
            assert launcher._compiled[key][0] is triton_picks, (n, view.data_ptr() % 16)
    assert len(launcher._compiled) == (4 if fast else 0)


def test_triton_prefill_launcher_refuses_calls_its_key_cannot_tell_apart():
    launcher = prefill_launch_module().Launcher(_scaled_copy_kernel)
    src = torch.zeros(16, device="cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(TypeError, match="pass constexpr BLOCK by keyword"):
        launcher((1,), src, src, 16, 1.0, 16)
    with pytest.raises(TypeError, match="pass factor by position"):
        launcher((1,), src, src, 16, factor=1.0, BLOCK=16)
    with pytest.raises(TypeError, match="grid must be a tuple"):
        launcher([1], src, src, 16, 1.0, BLOCK=16)


def test_triton_prefill_goes_token_by_token_only_on_short_calls():
    mod = load_triton_starter(PREFILL_DIR / "triton")
    limit = mod.TOKEN_SCAN_MAX_TOKENS
    assert mod.launch_config(limit, 1, 8, 128).token_scan
    assert not mod.launch_config(limit + 1, 1, 8, 128).token_scan
    assert not mod.launch_config(8192, 32, 8, 128).token_scan


def test_triton_prefill_without_state_and_default_scale():
    inputs = prefill_inputs([70, 3], Heads(1, 2, 32, 16), seed=8, with_state=False, scale=0.0)
    check(load_triton_starter(PREFILL_DIR / "triton").run, naive_prefill, inputs, prefill=True)


@pytest.mark.slow
@PREFILL_PATHS
def test_triton_prefill_qk16_v32(token_scan, monkeypatch):
    inputs = prefill_inputs([3, 20], Heads(16, 32, 16, 16), seed=9)
    check(prefill_on_path(monkeypatch, token_scan).run, naive_prefill, inputs, prefill=True)


def test_triton_prefill_rejects_head_sizes_tensor_cores_cannot_tile():
    inputs = prefill_inputs([4], Heads(1, 1, 24, 32))
    with pytest.raises(ValueError, match="power of two"):
        load_triton_starter(PREFILL_DIR / "triton").run(*inputs, *empty_outputs(inputs, True))


# --- the starters' packaging -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("starter", "params"),
    [
        (DECODE_DIR / "triton", DECODE_INPUTS + OUTPUTS),
        (PREFILL_DIR / "triton", PREFILL_INPUTS + OUTPUTS),
        (DECODE_DIR / "cuda", None),
    ],
    ids=["decode-triton", "prefill-triton", "decode-cuda"],
)
def test_starter_toml_names_an_existing_entry_point(starter, params):
    config = tomllib.loads((starter / "starter.toml").read_text())
    build = config["build"]
    file, func = build["entry_point"].split("::")
    assert (starter / file).is_file()
    assert build["destination_passing_style"] is True
    assert config["solution"]["description"].strip()
    if params is None:  # CUDA: the exported symbol, bound through tvm-ffi
        assert build["binding"] == "tvm-ffi"
        assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({func}," in (starter / file).read_text()
    else:
        fn = getattr(load_triton_starter(starter), func)
        assert tuple(inspect.signature(fn).parameters) == params


def test_entry_parameters_follow_the_contest_definitions(shared_dir):
    import json

    for name, params in ((DECODE, DECODE_INPUTS), (PREFILL, PREFILL_INPUTS)):
        definition = json.loads((shared_dir / "mlsys26" / "definitions" / "gdn" / f"{name}.json")
                                .read_text())
        assert tuple(definition["inputs"]) == params
        assert tuple(definition["outputs"]) == OUTPUTS


@pytest.mark.slow
def test_cuda_decode_compiles_and_exports_run(tmp_path):
    # No GPU needed: tvm-ffi compiles for the named architecture and loads the library.
    run = build_cuda_starter(tmp_path, arch=os.environ.get("TVM_FFI_CUDA_ARCH_LIST", "9.0a"))
    assert callable(run)


# --- GPU: every real workload shape ----------------------------------------------------------


@pytest.fixture(scope="module")
def cuda_decode(tmp_path_factory):
    return build_cuda_starter(tmp_path_factory.mktemp("gdn_cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("batch", DECODE_BATCHES)
def test_gpu_triton_decode_real_workloads(batch):
    run = load_triton_starter(DECODE_DIR / "triton").run
    check(run, kit_reference(DECODE), decode_inputs(batch, seed=batch, device="cuda"), False)


@pytest.mark.gpu
@pytest.mark.parametrize("batch", DECODE_BATCHES)
def test_gpu_cuda_decode_real_workloads(batch, cuda_decode):
    check(cuda_decode, kit_reference(DECODE), decode_inputs(batch, seed=batch, device="cuda"),
          False)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["triton", "cuda"])
def test_gpu_decode_without_state_raw_keys_and_qk16_v32(kernel, request):
    # The CUDA build is asked for only by the CUDA case: the Triton case must not error on a
    # machine where the CUDA starter cannot be built.
    run = (request.getfixturevalue("cuda_decode") if kernel == "cuda"
           else load_triton_starter(DECODE_DIR / "triton").run)
    for inputs in (
        decode_inputs(3, seed=11, device="cuda", with_state=False, scale=0.0),
        decode_inputs(5, seed=12, device="cuda", unit_keys=False),
        decode_inputs(8, QK16_V32, seed=13, device="cuda"),
    ):
        check(run, naive_decode, inputs, prefill=False)


@pytest.mark.gpu
@pytest.mark.parametrize(("total", "num_seqs"), PREFILL_SHAPES)
def test_gpu_triton_prefill_real_workloads(total, num_seqs):
    gen = torch.Generator().manual_seed(total * 100 + num_seqs)
    lengths = split_lengths(total, num_seqs, gen)
    inputs = prefill_inputs(lengths, seed=total + num_seqs, device="cuda")
    check(load_triton_starter(PREFILL_DIR / "triton").run, naive_prefill, inputs, prefill=True)


@pytest.mark.gpu
def test_gpu_triton_prefill_matches_kit_reference_and_qk16_v32():
    run = load_triton_starter(PREFILL_DIR / "triton").run
    check(run, kit_reference(PREFILL), prefill_inputs([40, 1, 300], seed=21, device="cuda"), True)
    check(run, naive_prefill, prefill_inputs([70, 0, 257], seed=22, device="cuda",
                                             with_state=False), True)
    check(run, naive_prefill, prefill_inputs([100, 7, 450], QK16_V32, seed=23, device="cuda"),
          True)
    # more sequences than stage 2 ranks by length: its own launch, in the batch's order
    many = [3 + (37 * i) % 70 for i in range(80)]
    check(run, naive_prefill, prefill_inputs(many, seed=24, device="cuda"), True)
