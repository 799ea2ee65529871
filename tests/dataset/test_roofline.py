"""Roofline: GPU detection, cost models against hand counts, floors and their bound."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from fib_core.dataset.roofline import (
    GPU_PEAKS,
    Cost,
    GpuPeak,
    detect_gpu_peak,
    roofline_floor_ms,
    roofline_fraction,
    workload_cost,
    workload_size,
)
from fib_core.dataset.workload_table import REAL_WORKLOADS, workload_rows


@pytest.mark.parametrize(
    ("device_name", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA B200", "B200"),
    ],
)
def test_detect_gpu_peak_by_device_name(device_name, expected):
    assert detect_gpu_peak(device_name) is GPU_PEAKS[expected]


@pytest.mark.parametrize("device_name", ["NVIDIA GH200 480GB", "NVIDIA A100-SXM4-80GB", "", None, "cpu"])
def test_unknown_gpus_are_not_guessed(device_name):
    assert detect_gpu_peak(device_name) is None


def test_peaks_are_dense_datasheet_figures():
    for peak in GPU_PEAKS.values():
        assert peak.fp8_tflops == pytest.approx(2 * peak.bf16_tflops, rel=0.01)
    assert GPU_PEAKS["B200"].bandwidth_gbs > GPU_PEAKS["H200"].bandwidth_gbs > GPU_PEAKS["H100 SXM"].bandwidth_gbs
    with pytest.raises(ValueError, match="bandwidth_gbs"):
        GpuPeak("bad", bandwidth_gbs=0, bf16_tflops=1, fp8_tflops=1)


def test_floor_picks_the_slower_side_and_reports_it():
    peak = GpuPeak("toy", bandwidth_gbs=1000, bf16_tflops=100, fp8_tflops=200)
    memory = roofline_floor_ms(Cost(bytes=10**9, flops=10**9, dtype="bfloat16"), peak)
    assert memory.bound == "memory"
    assert memory.ms == pytest.approx(1.0) and float(memory) == pytest.approx(1.0)
    compute = roofline_floor_ms(Cost(bytes=1, flops=10**12, dtype="bfloat16"), peak)
    assert compute.bound == "compute" and compute.ms == pytest.approx(10.0)
    fp8 = roofline_floor_ms(Cost(bytes=1, flops=10**12, dtype="float8_e4m3fn"), peak)
    assert fp8.ms == pytest.approx(5.0)
    floor_ms, bound = fp8  # unpacks like a plain pair
    assert (floor_ms, bound) == (fp8.ms, "compute")
    assert roofline_fraction(Cost(10**9, 0, "bfloat16"), peak, 4.0) == pytest.approx(0.25)


def test_cost_validation_and_report_style_replace():
    with pytest.raises(ValueError):
        Cost(bytes=-1, flops=0, dtype="bfloat16")
    cost = Cost(bytes=2 * 10**9, flops=10**12, dtype="bfloat16")
    assert dataclasses.replace(cost, flops=0).flops == 0
    assert cost.achieved_gbs(1.0) == pytest.approx(2000)
    assert cost.achieved_tflops(1.0) == pytest.approx(1000)


def test_gdn_decode_cost_is_the_state_twice_plus_small_tensors():
    cost = workload_cost("gdn_decode_qk4_v8_d128_k_last", {"batch_size": 2})
    state = 2 * 8 * 128 * 128 * 4
    small = 2 * (4 + 4 + 8) * 128 * 2 + 2 * 8 * 4 + 2 * 2 * 8 * 2 + 2 * 8 * 128 * 2
    assert cost.bytes == 2 * state + small
    peak = GPU_PEAKS["H100 SXM"]
    assert roofline_floor_ms(cost, peak).bound == "memory"


def test_dsa_cost_counts_only_selected_rows_and_uses_actual_indices():
    axes = {"num_tokens": 2, "num_pages": 8462}
    estimate = workload_cost("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", axes)
    idx = torch.full((2, 2048), -1, dtype=torch.int32)
    idx[0, :100] = torch.arange(100)
    idx[1, :50] = torch.arange(50)  # rows shared with token 0
    exact = workload_cost("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", axes, {"sparse_indices": idx})
    row_bytes = (512 + 64) * 2
    assert estimate.bytes - exact.bytes == (2 * 2048 - 100) * row_bytes
    assert exact.flops == 150 * 16 * 2 * (576 + 512)
    # The cache itself (8462 pages) is never counted whole.
    assert estimate.bytes < 8462 * 64 * row_bytes / 10


def test_indexer_cost_uses_actual_seq_lens():
    axes = {"batch_size": 2, "max_num_pages": 4, "num_pages": 100}
    lens = torch.tensor([1, 130], dtype=torch.int32)
    exact = workload_cost("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", axes, {"seq_lens": lens})
    fixed = 2 * 64 * 128 + 2 * 64 * 4 + 2 * 4 + 2 * 4 * 4 + 2 * 2048 * 4
    assert exact.bytes == fixed + (1 + 3) * 64 * 132
    assert exact.flops == 131 * 64 * 2 * 128


def test_moe_cost_reads_only_chosen_experts():
    name = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
    expert = (4096 * 7168 + 7168 * 2048) + (32 * 56 + 56 * 16) * 4
    one = workload_cost(name, {"seq_len": 1})
    many = workload_cost(name, {"seq_len": 14107})
    assert one.bytes < 2 * expert and many.bytes > 31 * expert
    assert many.flops == pytest.approx(14107 * 2 * 7168 * 6144, rel=1e-6)
    # A hand-built routing: each token's logits are high on 8 experts (in at most 4 groups of
    # 32, so their groups survive the group selection) and low elsewhere, bias 0. The local
    # experts are 0..31: token 0 picks 4 of them, token 1 all 8 from 2..9, token 2 none,
    # token 3 one (31): 13 local (token, expert) pairs over 11 distinct local experts.
    picks = [[0, 1, 2, 3, 40, 41, 42, 43], list(range(2, 10)), list(range(100, 108)),
             [31, 64, 65, 66, 67, 68, 69, 70]]
    logits = torch.full((4, 256), -10.0)
    for token, experts in enumerate(picks):
        logits[token, experts] = 10.0
    route = {"routing_logits": logits, "routing_bias": torch.zeros(256),
             "local_expert_offset": 0}
    exact = workload_cost(name, {"seq_len": 4}, route)
    assert exact.flops == 13 * 2 * 7168 * 6144
    base = workload_cost(name, {"seq_len": 4}, {**route, "local_expert_offset": 10**6})
    assert base.flops == 0  # no expert is local: no GEMM work
    assert exact.bytes - base.bytes == 11 * expert


def test_every_real_workload_has_a_cost_and_floors_grow_with_size():
    peak = GPU_PEAKS["B200"]
    for name in REAL_WORKLOADS:
        floors = [roofline_floor_ms(workload_cost(name, row), peak).ms for row in workload_rows(name)]
        assert all(f > 0 for f in floors)
    small = workload_cost("gdn_prefill_qk4_v8_d128_k_last", {"total_seq_len": 6, "num_seqs": 1})
    big = workload_cost("gdn_prefill_qk4_v8_d128_k_last", {"total_seq_len": 8192, "num_seqs": 57})
    assert big.bytes > small.bytes and big.flops > small.flops


def test_unknown_definition_raises_key_error():
    with pytest.raises(KeyError, match="no cost model"):
        workload_cost("not_a_definition", {})


def test_workload_size_is_bytes_plus_flops_and_orders_by_the_axes():
    cost = workload_cost("gdn_prefill_qk4_v8_d128_k_last", {"total_seq_len": 6, "num_seqs": 1})
    size = workload_size("gdn_prefill_qk4_v8_d128_k_last", {"total_seq_len": 6, "num_seqs": 1})
    assert size == float(cost.bytes + cost.flops) and size > 0
    assert workload_size("gdn_decode_qk4_v8_d128_k_last", {"batch_size": 64}) > workload_size(
        "gdn_decode_qk4_v8_d128_k_last", {"batch_size": 1}
    )
    with pytest.raises(KeyError, match="no cost model"):
        workload_size("not_a_definition", {})
