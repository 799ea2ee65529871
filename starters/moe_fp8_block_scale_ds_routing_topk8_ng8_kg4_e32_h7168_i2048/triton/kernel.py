"""Entry point: FP8 block-scale MoE with DeepSeek-V3 routing, no host sync, one to three launches.

Up to a few hundred tokens, one persistent, cooperative launch runs the phases below, with a
grid barrier between each two. The judge's timer counts a call from its first kernel's start to
its last kernel's end, so every launch after the first would cost its host time (about 20-30 us
a Triton launch) while the GPU waits; at a few tokens that was most of the call.

    route           per token: sigmoid, group top-2 sums, top-4 groups, top-8 experts,
                    normalised weights; appends local pairs to per-expert lists (routing.py)
    gemm1           grouped FP8 GEMM x @ W1^T over the local experts, SwiGLU and e4m3
                    re-quantisation of h in the epilogue (grouped_gemm.py)
    reduce1         split K only: sums GEMM1's K parts, then the same epilogue
    gemm2           grouped FP8 GEMM h @ W2^T, times the routing weight, at padded rows
    combine         per token, the sum of its (at most 8) local rows -> bf16 output
                    (combine.py); it also zeroes the expert counts for the next call

From a few hundred tokens (``TileConfig(fused=False)``, tiles.pick_config), route and GEMM1
share one cooperative launch and GEMM2 and combine are launches of their own: GEMM1 keeps the
GPU busy for longer than the host takes to queue the rest (295 us at T=901), and GEMM2 then
gets a shape of its own (64-row tiles, 4 warps, three programs per SM, h and W2 tiles through TMA
descriptors); the combine step runs eight programs per SM. Triton's CPU interpreter runs
programs one after another (a grid barrier would wait forever), so there each phase is a
launch of its own.

Measured earlier on one H100 under the judge's timer (the kit's CUPTI span; random routing,
the contest's 19 token counts; benchmarks/bench_moe.py): mean 643 -> 461 us against the five-launch
version; T=1 261 -> 72 us (that version's kernels were busy 68 us of it); T=80 451 -> 304 us;
T=14107 2282 -> 2120 us. Every output within the contest's tolerance, 2.1-2.3% relative L2.

Measured on one H200 (Triton 3.6), same machine, old tiles against the tiles of that change
(16 x 128 tiles, two programs per SM up to 256 tokens; 64 x 128 with 8 warps near 1,000):
- benchmarks/bench_moe.py (kit timer, random routing): mean 408.8 -> 382.7 us; T=14..80
  9-23% faster, T=901 462 -> 423 us, T=1 59 -> 55 us; T=11948 and 14107 2.4% faster with 4
  GEMM1 stages instead of 3 (2053 -> 2001 and 2084 -> 2030 us).
- run_local on the embedded dataset (unbalanced routing), before the 4 GEMM1 stages: mean
  445.9 -> 420.2 us, 19/19 passed, also isolated (419.9 us); T <= 80 173 -> 153 us; T=901
  744 -> 560 us.

Measured on one H200 (Triton 3.6), GEMM2 as a launch of its own from a few hundred tokens
(run_local on the embedded dataset, 19/19 passed in every run): mean 416.7 us before, 394.0
after (isolated 393.1); T=14107 3277 -> 3070 us (3003-3009 in a probe on random activations),
T=11948 1571 -> 1426, T=901 562 -> 502; the other 16 workloads unchanged. GEMM2 alone (torch
profiler, the same routing): T=14107 1130 -> 838 us, T=11948 485 -> 343, T=901 181 -> 123.
GEMM1 queued as a launch of its own after the routing left the GPU idle 40-85 us at T=901,
hence their shared launch; at T=11948 and 14107 that costs 6-11 us against separate launches.

Measured on one H200 (Triton 3.6), the combine launch at eight programs per SM, four tokens a
step (run_local on the embedded dataset, old and new on one machine, 19/19 passed): mean 386.3
-> 372.3 us (isolated 372.4); T=14107 2978 -> 2839, T=11948 1417 -> 1326, T=901 500 -> 472; the
other 16 workloads (one launch) unchanged.

Where the time goes (H200, embedded routing, each phase launched alone, torch profiler):
- T=80 (264 programs, 13 active experts): route 6, GEMM1 99, GEMM2 53, combine 6 us. GEMM1
  streams W1 at 3.85 TB/s, GEMM2 W2 at 3.6 TB/s (80% and 74% of the datasheet's 4.8); the
  whole call is at 69% of the weight-bytes floor. Loading the weight tiles through TMA
  instead of pointers changed it by under 1% (T=1, 14, 55, 80: 71.2 -> 70.8, 146.7 -> 145.3,
  184.1 -> 183.1, 174.2 -> 173.1 us), so load instructions are not what holds it back.
- T=14107 (25,668 local pairs): route 101, GEMM1 1701, GEMM2 838, combine 306 us (167 at
  eight programs per SM, four tokens a step, as now launched). GEMM1 runs
  at about 885 TFLOP/s, 65% of cuBLAS's FP8 rate without block scales (1361-1385 TFLOP/s at
  4096 x 4096 x 7168): each 128-wide K step waits for its MMA, then scales and adds it in fp32
  (one FMA per output element, by count about a quarter of the step's MMA time) before the
  next MMA may start. Two warp groups taking turns, as DeepGEMM does, would overlap the two;
  Triton 3.6's ``tl.range(warp_specialize=True)`` did not help on Hopper. Several programs
  per SM overlap them too, which is what GEMM2's 4-warp, 3-per-SM tiles gain from.
- The routing phase is bound by instructions (ncu: 34 M issued for 14107 tokens, 8 warps per
  SM, 50% SM throughput). The combine phase was bound by latency at one program per SM (8
  masked gathers per token block, 306 us at T=14107); at eight per SM it moves its ~570 MB at
  72% of the HBM's bandwidth (167 us against 120).
A standalone probe of the GEMM shapes (block scales, H200): GEMM2's 4096 x 7168 x 2048 ran at
750 TFLOP/s in 128 x 128 tiles with 8 warps and pointer loads, 977 in 64 x 128 tiles with 4
warps, three per SM, through TMA, and 657 in the latter with pointer loads. GEMM1 in 128 x 64
tiles with 4 warps, two per SM, ran at 963 against 858, but h's scale blocks would then be 64
wide and GEMM2 with 64-wide K steps reached 699 at best: a net loss, not taken.
Tried without gain (H200): the routing with packed int64 keys and tl.max, with tl.topk, and
with one atomic per (block, expert) instead of one per pair (84-97 us against 96); the
combine with the next block's rows loaded ahead (229 against 195 us) or with slots no token
of the block has skipped (393 us); the GEMM1 loop skewed so step i's MMA is issued before step
i-1 is scaled (Triton still waits for every MMA: wgmma.wait_group 0); 64 x 128 tiles with 4
or 8 warps and 128 x 64 tiles at T=14107 in the one-launch kernel (3.6-8.5 ms, measured
together with these tiles at 3.2 ms on one machine that ran everything about 50% slower);
GEMM1 tiles of 128 h columns computed in two passes of 64 by two 4-warp programs per SM,
holding the first pass's h in fp32 scratch until the second gave the block's amax (so h keeps
128-wide scale blocks): with 128-row tiles ptxas spilled 60-78 registers at its 255, and the
versions that did not spill (32-column passes, 64-row tiles, 8 warps) were no faster; GEMM1
alone took 1172-1781 us against 956 (random routing, T=14107); plain 64-column tiles fared
no better (1166-1448 us, 4 or 8 warps, one to three per SM), unlike the standalone probe above;
32-row tiles at small T read the weights of experts with 17-25 rows once (T=32 240 -> 228 us,
T=56 239 -> 220) but cost 15-26 us at T=14, 52, 55, 59 and 80, which the token count alone
cannot tell apart; a grid barrier spinning on acquire loads, one atomic per program (1.81
against 2.03 us per barrier at 264 programs, 2.27 against 2.20 at 396); the routing as a
launch of its own, eight programs per SM, at T=11948 and 14107: its kernels were busy 10-105 us
less, but the GPU then waited for the host to queue GEMM1 (T=11948, four alternating rounds:
1345-1399 against 1322-1323 us; T=14107 a wash, 2839-2898 against 2833-2910); the GEMMs'
tile loops flattened into their K loops (``tl.range(flatten=True)``, so loads run ahead across
tiles): no better alone (T=16 125 against 106 us, T=901 477-514 against 471, T=14107
3183-3710 against 2816), and with other K splits mixed (T=1 split 4/2 66 against 72 us, T=15
split 2/2 91 against 103, but T=14 163 against 143); GEMM1 in 64 x 256 tiles of 4 warps, two
per SM, to overlap one program's scaling with the other's MMAs: 255 registers and 6-8 spilled,
T=14107 3236 against 2820 us, T=11948 1525 against 1310, T=901 525 against 471.

Sizes (hidden, intermediate, local experts, experts) come from the tensors' shapes, so the
same code runs on reduced problems; both sizes must be multiples of 128.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from .combine import BLOCK_C, combine_phase
from .grouped_gemm import gemm1_phase, gemm2_phase, reduce1_phase
from .routing import GROUPS_KEPT, NUM_GROUPS, TOP_K, check_num_experts, route_phase
from .schedule import block_bound, grid_barrier
from .tiles import SCALE_BLOCK, TileConfig, pick_config

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
# The tests set this to run GEMM2's TMA path in Triton's CPU interpreter, which emulates
# tensor descriptors (Triton 3.9); calls on a CPU otherwise read h and W2 through pointers.
TMA_IN_INTERPRETER = False

# Phases, as bits of the kernel's PHASES mask.
ROUTE, GEMM1, REDUCE1, GEMM2, COMBINE = 1, 2, 4, 8, 16
ALL_PHASES = ROUTE | GEMM1 | REDUCE1 | GEMM2 | COMBINE


@triton.jit
def _moe_kernel(
    logits_ptr, bias_ptr, x_ptr, xs_ptr, w1_ptr, w1s_ptr, w2_ptr, w2s_ptr, out_ptr,
    ids_ptr, weights_ptr, prow_ptr, counts_ptr, lists_ptr, hq_ptr, hs_ptr, part_ptr, y_ptr,
    sync_ptr, hq_desc, w2_desc,
    num_tokens, rows_total, expert_offset, scaling,
    stride_logits, stride_xt, stride_xsb, stride_xst,
    stride_w1e, stride_w1n, stride_w1k, stride_w1se, stride_w1sn, stride_w1sk,
    stride_w2e, stride_w2n, stride_w2k, stride_w2se, stride_w2sn, stride_w2sk,
    stride_hq, stride_hs, stride_out,
    NUM_EXPERTS: tl.constexpr, N_GROUPS: tl.constexpr, KEPT: tl.constexpr, TOPK: tl.constexpr,
    HIDDEN: tl.constexpr, INTER: tl.constexpr, E_LOCAL: tl.constexpr, E_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N2: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr, ROUTE_T: tl.constexpr, COMBINE_T: tl.constexpr,
    SPLIT1: tl.constexpr, SPLIT2: tl.constexpr, STAGES1: tl.constexpr, STAGES2: tl.constexpr,
    TMA2: tl.constexpr, PHASES: tl.constexpr, BARRIERS: tl.constexpr,
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    if PHASES & 1:
        route_phase(pid, nprog, logits_ptr, bias_ptr, ids_ptr, weights_ptr, prow_ptr,
                    counts_ptr, lists_ptr, num_tokens, expert_offset, scaling, stride_logits,
                    NUM_EXPERTS, N_GROUPS, KEPT, TOPK, E_LOCAL, ROUTE_T)
    # Each barrier waits for the phase before it, and only where the phase after it is in
    # this launch (the per-phase path's first launch stops after GEMM1).
    if BARRIERS and PHASES & 2:
        grid_barrier(sync_ptr, nprog)
    if PHASES & 2:
        gemm1_phase(pid, nprog, x_ptr, xs_ptr, w1_ptr, w1s_ptr, counts_ptr, lists_ptr, hq_ptr,
                    hs_ptr, part_ptr, num_tokens, rows_total,
                    stride_xt, stride_xsb, stride_xst, stride_w1e, stride_w1n, stride_w1k,
                    stride_w1se, stride_w1sn, stride_w1sk, stride_hq, stride_hs,
                    HIDDEN, INTER, E_LOCAL, E_PAD, TOPK, BLOCK_M, BLOCK_H, BLOCK_K,
                    SPLIT1, STAGES1)
    if SPLIT1 > 1:
        if BARRIERS and PHASES & 4:
            grid_barrier(sync_ptr + 1, nprog)
        if PHASES & 4:
            reduce1_phase(pid, nprog, counts_ptr, part_ptr, hq_ptr, hs_ptr, rows_total,
                          stride_hq, stride_hs, INTER, E_LOCAL, E_PAD, BLOCK_M, BLOCK_H, SPLIT1)
    if BARRIERS and PHASES & 8:
        grid_barrier(sync_ptr + 2, nprog)
    if PHASES & 8:
        gemm2_phase(pid, nprog, hq_ptr, hs_ptr, w2_ptr, w2s_ptr, counts_ptr, lists_ptr,
                    weights_ptr, y_ptr, prow_ptr, hq_desc, w2_desc, num_tokens, rows_total,
                    stride_hq, stride_hs,
                    stride_w2e, stride_w2n, stride_w2k, stride_w2se, stride_w2sn, stride_w2sk,
                    HIDDEN, INTER, E_LOCAL, E_PAD, BLOCK_M, BLOCK_M2, BLOCK_N2, BLOCK_H, SPLIT2,
                    STAGES2, TMA2)
    if BARRIERS and PHASES & 16:
        grid_barrier(sync_ptr + 3, nprog)
    if PHASES & 16:
        combine_phase(pid, nprog, y_ptr, prow_ptr, counts_ptr, out_ptr, num_tokens,
                      rows_total, stride_out, HIDDEN, E_LOCAL, E_PAD, TOPK, COMBINE_T, BLOCK_C,
                      SPLIT2)


@dataclass(frozen=True)
class Workspace:
    """Device buffers of one call. ``counts`` and ``sync`` persist across calls (see below)."""

    ids: torch.Tensor  # [T, 8] int32: global expert ids, order of choice
    weights: torch.Tensor  # [T, 8] f32: routing weights (normalised, times the scaling)
    prow: torch.Tensor  # [T, 8] int32: padded row of each local pair, -1 when not local
    counts: torch.Tensor  # [E] int32: pairs per local expert (zero between calls)
    lists: torch.Tensor  # [E, T] int32: pair ids (token * 8 + slot) per local expert
    hq: torch.Tensor  # [rows, I] e4m3: SwiGLU output, re-quantised
    hs: torch.Tensor  # [rows, I / block_h] f32: its scales
    part: torch.Tensor  # [split1, rows, 2I] f32: GEMM1's K parts (1 element when split1 = 1)
    y: torch.Tensor  # [split2, rows, H]: weighted GEMM2 rows (bf16; f32 parts when split)
    sync: torch.Tensor  # [4] int32: the grid barriers' counters (zero between calls)


_PERSISTENT: dict[tuple, torch.Tensor] = {}


def _persistent_zeros(device: torch.device, size: int, role: str) -> torch.Tensor:
    """A zeroed int32 buffer allocated once per device; every call leaves it at zero again
    (the counts are reset by the combine phase, the barrier counters by their last user), so
    no call pays for a zero-fill kernel."""
    key = (device, size, role)
    buf = _PERSISTENT.get(key)
    if buf is None:
        buf = _PERSISTENT[key] = torch.zeros(size, dtype=torch.int32, device=device)
    return buf


def make_workspace(num_tokens: int, hidden: int, inter: int, num_local: int,
                   config: TileConfig, device: torch.device, persistent: bool) -> Workspace:
    """Allocate one call's buffers. ``persistent`` (a GPU call running every phase): the
    counts are the persistent zeroed buffer, so no zero-fill kernel runs before the call's
    first launch, where the judge's timer starts; otherwise a fresh zeroed one."""
    rows = block_bound(num_tokens, num_local, TOP_K, config.block_m) * config.block_m
    pairs = (num_tokens, TOP_K)
    i32 = dict(dtype=torch.int32, device=device)
    f32 = dict(dtype=torch.float32, device=device)
    part_shape = (config.split1, rows, 2 * inter) if config.split1 > 1 else (1,)
    y_dtype = torch.bfloat16 if config.split2 == 1 else torch.float32
    return Workspace(
        ids=torch.empty(pairs, **i32), weights=torch.empty(pairs, **f32),
        prow=torch.empty(pairs, **i32),
        counts=(_persistent_zeros(device, num_local, "counts") if persistent
                else torch.zeros(num_local, **i32)),
        lists=torch.empty((num_local, num_tokens), **i32),
        hq=torch.empty((rows, inter), dtype=torch.float8_e4m3fn, device=device),
        hs=torch.empty((rows, inter // config.block_h), **f32),
        part=torch.empty(part_shape, **f32),
        y=torch.empty((config.split2, rows, hidden), dtype=y_dtype, device=device),
        sync=_persistent_zeros(device, 4, "sync"),
    )


_RESIDENT: dict[tuple, int] = {}


def resident_per_sm(compiled, device: torch.device) -> int:
    """Programs of a compiled kernel that fit on one SM at once (registers, shared memory,
    threads): a cooperative launch must not exceed this times the SM count."""
    props = torch.cuda.get_device_properties(device)
    warps = compiled.metadata.num_warps
    regs_per_warp = -(-compiled.n_regs * 32 // 256) * 256  # allocated per warp, 256 at a time
    by_regs = getattr(props, "regs_per_multiprocessor", 65536) // (regs_per_warp * warps)
    smem = compiled.metadata.shared
    smem_sm = getattr(props, "shared_memory_per_multiprocessor", 233472)
    by_smem = smem_sm // (smem + 1024) if smem else 32  # 1 KB a block is the driver's
    by_threads = getattr(props, "max_threads_per_multi_processor", 2048) // (32 * warps)
    return min(by_regs, by_smem, by_threads, 32)


def _launch_one(args: tuple, meta: dict, config: TileConfig, dev: torch.device,
                key: tuple, phases: int = ALL_PHASES) -> None:
    """The ``phases`` in one cooperative launch of as many programs as stay resident.

    The residency is computed per (config, sizes, phases): each set of phases is a kernel of
    its own.

    The first call of a config computes the residency from the compiled kernel; should the
    driver still refuse the grid (a cooperative launch too large is refused before anything
    runs, and leaves the context usable), one program per SM fewer is tried and remembered.
    """
    key = (*key, phases)
    if key not in _RESIDENT:
        compiled = _moe_kernel.warmup(*args, grid=(1,), PHASES=phases, BARRIERS=True,
                                      **meta, launch_cooperative_grid=True)
        compiled._init_handles()
        _RESIDENT[key] = min(config.programs_per_sm, resident_per_sm(compiled, dev))
    while True:
        per_sm = _RESIDENT[key]
        if per_sm < 1:
            raise RuntimeError(f"{config}: one program does not fit on an SM")
        try:
            _moe_kernel[(_programs(dev, per_sm),)](
                *args, PHASES=phases, BARRIERS=True, **meta, launch_cooperative_grid=True)
            return
        except RuntimeError as err:
            if "cooperative launch" not in str(err):
                raise
            _RESIDENT[key] = per_sm - 1


@functools.lru_cache(maxsize=8)
def _sm_count(device: torch.device) -> int:
    """Multiprocessor count, queried once per device (the query is not free)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def _programs(device: torch.device, per_sm: int) -> int:
    """A launch's program count: ``per_sm`` per SM on a GPU, 4 in the CPU interpreter."""
    return _sm_count(device) * per_sm if device.type == "cuda" else 4


@functools.lru_cache(maxsize=8)
def _has_tma(device: torch.device) -> bool:
    """Whether the GPU has TMA (Hopper and later), queried once per device."""
    return torch.cuda.get_device_capability(device)[0] >= 9


def moe_forward(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
    local_expert_offset: int,
    routed_scaling_factor: float,
    output: torch.Tensor,
    config: TileConfig | None = None,
    phases: int = ALL_PHASES,
) -> Workspace:
    """Same as :func:`run`, with an optional tile config (for tuning); returns the workspace.

    ``phases`` (a mask of ROUTE, GEMM1, ...) runs only some phases, one launch each, which the
    tests use to check the routing alone.
    """
    num_tokens, hidden = hidden_states.shape
    num_local, two_inter, _ = gemm1_weights.shape
    inter = two_inter // 2
    config = config or pick_config(num_tokens, hidden, inter)
    config.check_sizes(hidden, inter)
    check_num_experts(routing_logits.shape[1])
    if output.stride(1) != 1:
        raise ValueError("output: the hidden dimension must be contiguous")
    dev = hidden_states.device
    on_gpu = dev.type == "cuda" and not _INTERPRET
    fused = on_gpu and config.fused and phases == ALL_PHASES
    ws = make_workspace(num_tokens, hidden, inter, num_local, config, dev,
                        persistent=on_gpu and phases == ALL_PHASES)
    if num_tokens == 0:
        return ws
    tma = config.tma and gemm2_weights.is_contiguous() and (
        (on_gpu and _has_tma(dev))
        or (_INTERPRET and TMA_IN_INTERPRETER))
    hq_desc = w2_desc = None
    if tma:  # descriptors of h [rows, I] and of W2 as [E * H, I], one tile each per K step
        from triton.tools.tensor_descriptor import TensorDescriptor

        rows2 = config.gemm2_rows or config.block_m
        hq_desc = TensorDescriptor.from_tensor(ws.hq, [rows2, config.block_h])
        w2_desc = TensorDescriptor.from_tensor(gemm2_weights.view(-1, inter),
                                               [config.block_n2, config.block_h])
    logits = routing_logits if routing_logits.stride(1) == 1 else routing_logits.contiguous()
    x = hidden_states if hidden_states.stride(1) == 1 else hidden_states.contiguous()
    args = (
        logits, routing_bias.contiguous(), x, hidden_states_scale, gemm1_weights,
        gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, output,
        ws.ids, ws.weights, ws.prow, ws.counts, ws.lists, ws.hq, ws.hs, ws.part, ws.y, ws.sync,
        hq_desc, w2_desc,
        num_tokens, ws.hq.shape[0], int(local_expert_offset), float(routed_scaling_factor),
        logits.stride(0), x.stride(0), *hidden_states_scale.stride(),
        *gemm1_weights.stride(), *gemm1_weights_scale.stride(),
        *gemm2_weights.stride(), *gemm2_weights_scale.stride(),
        ws.hq.stride(0), ws.hs.stride(0), output.stride(0),
    )
    meta = dict(
        NUM_EXPERTS=routing_logits.shape[1], N_GROUPS=NUM_GROUPS, KEPT=GROUPS_KEPT, TOPK=TOP_K,
        HIDDEN=hidden, INTER=inter, E_LOCAL=num_local, E_PAD=triton.next_power_of_2(num_local),
        BLOCK_M=config.block_m, BLOCK_M2=config.gemm2_rows or config.block_m,
        BLOCK_H=config.block_h, BLOCK_N2=config.block_n2,
        BLOCK_K=SCALE_BLOCK, BLOCK_C=BLOCK_C, ROUTE_T=config.route_tokens,
        COMBINE_T=config.combine_tokens, SPLIT1=config.split1, SPLIT2=config.split2,
        STAGES1=config.stages1, STAGES2=config.stages2, TMA2=tma, num_warps=config.num_warps,
    )
    key = (dev, config, hidden, inter, num_local, routing_logits.shape[1])
    if fused:
        _launch_one(args, meta, config, dev, key)
        return ws
    if on_gpu and phases == ALL_PHASES:
        # A launch per phase, except that routing and GEMM1 share the first (cooperative)
        # one: routing is short, and the GPU would idle while the host queued GEMM1 after it.
        _launch_one(args, meta, config, dev, key, ROUTE | GEMM1 | REDUCE1)
        todo = [GEMM2, COMBINE]
    else:  # the interpreter and phase subsets launch each phase alone
        todo = [bit for bit in (ROUTE, GEMM1, REDUCE1, GEMM2, COMBINE)
                if phases & bit and (bit != REDUCE1 or config.split1 > 1)]
    # GEMM2 and combine may have widths of their own.
    try:
        for bit in todo:
            per_sm, warps = config.programs_per_sm, config.num_warps
            if bit == GEMM2:
                per_sm, warps = config.gemm2_per_sm or per_sm, config.gemm2_warps or warps
            elif bit == COMBINE:
                per_sm = config.combine_per_sm or per_sm
            _moe_kernel[(_programs(dev, per_sm),)](*args, PHASES=bit, BARRIERS=False,
                                                   **{**meta, "num_warps": warps})
    except Exception:
        # A later launch failed on the host (a compile error, say) after routing filled the
        # persistent counts; only the combine phase zeroes them, and the next call's routing
        # would append past its lists.
        ws.counts.zero_()
        raise
    return ws


def run(
    routing_logits,
    routing_bias,
    hidden_states,
    hidden_states_scale,
    gemm1_weights,
    gemm1_weights_scale,
    gemm2_weights,
    gemm2_weights_scale,
    local_expert_offset,
    routed_scaling_factor,
    output,
):
    """Destination-passing entry: the definition's inputs in order, then ``output`` [T, H] bf16."""
    moe_forward(
        routing_logits,
        routing_bias,
        hidden_states,
        hidden_states_scale,
        gemm1_weights,
        gemm1_weights_scale,
        gemm2_weights,
        gemm2_weights_scale,
        int(local_expert_offset),
        float(routed_scaling_factor),
        output,
    )
