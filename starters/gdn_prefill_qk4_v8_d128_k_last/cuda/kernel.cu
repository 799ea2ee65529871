// Gated delta net prefill (Qwen3-Next), k-last state: CUDA template, bound through tvm-ffi.
//
// THIS IS A TEMPLATE. The signature, the input checks, the stream and the export line are ready;
// the kernel is yours to write. Until you do, `run` throws NotImplementedError so a benchmark run
// reports it plainly instead of comparing garbage.
//
// What to compute: sequences are packed along tokens; sequence i is tokens
// cu_seqlens[i] .. cu_seqlens[i+1]. Per sequence and value head h (q/k head h / (Hv / Hq)),
// with S = state[i, h] as a [V=128, K=128] fp32 matrix (zeros when `state` is absent):
//   g    = exp(-exp(A_log[h]) * softplus(a[t, h] + dt_bias[h]))
//   beta = sigmoid(b[t, h])
//   S <- g * S;  u = beta * (v[t, h] - S k[t]);  S <- S + u k[t]^T;  output[t, h] = scale * S q[t]
// scale == 0 means 1 / sqrt(head size). new_state[i, h] is S after the sequence's last token.
// No L2 normalisation of q or k. Accumulate in fp32.
//
// Hints: token-by-token recurrence is latency-bound on long sequences; the chunked form (as in
// flash-linear-attention: 64-token chunks, intra-chunk matmuls, inter-chunk state passing) is
// what fast kernels use.

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

#include <cmath>
#include <cstdint>

namespace {

using tvm::ffi::Optional;
using tvm::ffi::TensorView;

// A readable error for the most common mistakes: wrong device, rank or element type.
void check_tensor(const TensorView& t, const char* name, int ndim, DLDataTypeCode code,
                  int bits) {
  if (t.device().device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << name << ": expected a CUDA tensor";
  }
  if (t.ndim() != ndim) {
    TVM_FFI_THROW(ValueError) << name << ": expected " << ndim << " dimensions, got " << t.ndim();
  }
  if (t.dtype().code != code || t.dtype().bits != bits) {
    TVM_FFI_THROW(TypeError) << name << ": unexpected element type";
  }
}

}  // namespace

// Your kernel goes here. One possible split: one block per (sequence, value head), walking the
// sequence in chunks; `state` may be nullptr (start from zeros).
__global__ void gdn_prefill_kernel(const __nv_bfloat16* __restrict__ q,
                                   const __nv_bfloat16* __restrict__ k,
                                   const __nv_bfloat16* __restrict__ v,
                                   const float* __restrict__ state,
                                   const int64_t* __restrict__ cu_seqlens, float scale,
                                   __nv_bfloat16* __restrict__ output,
                                   float* __restrict__ new_state) {
  // TODO(contestant): the recurrence.
}

namespace {

void run(TensorView q,                 // [total_seq_len, 4, 128] bf16: token, q head, k dim
         TensorView k,                 // [total_seq_len, 4, 128] bf16: token, k head, k dim
         TensorView v,                 // [total_seq_len, 8, 128] bf16: token, v head, v dim
         Optional<TensorView> state,   // [num_seqs, 8, 128, 128] f32 [seq, head, V, K] (k-last),
                                       //   or None: start from zeros
         TensorView A_log,             // [8] float32: log decay per v head
         TensorView a,                 // [total_seq_len, 8] bf16: decay input per token, v head
         TensorView dt_bias,           // [8] float32
         TensorView b,                 // [total_seq_len, 8] bf16: update gate input
         TensorView cu_seqlens,        // [num_seqs + 1] int64: sequence boundaries, starts at 0
         double scale,                 // output scale (a Python float arrives as double)
         TensorView output,            // [total_seq_len, 8, 128] bf16, written by you
         TensorView new_state) {       // [num_seqs, 8, 128, 128] float32, written by you
  check_tensor(q, "q", 3, kDLBfloat, 16);
  check_tensor(k, "k", 3, kDLBfloat, 16);
  check_tensor(v, "v", 3, kDLBfloat, 16);
  if (state.has_value()) check_tensor(state.value(), "state", 4, kDLFloat, 32);
  check_tensor(A_log, "A_log", 1, kDLFloat, 32);
  check_tensor(a, "a", 2, kDLBfloat, 16);
  check_tensor(dt_bias, "dt_bias", 1, kDLFloat, 32);
  check_tensor(b, "b", 2, kDLBfloat, 16);
  check_tensor(cu_seqlens, "cu_seqlens", 1, kDLInt, 64);
  check_tensor(output, "output", 3, kDLBfloat, 16);
  check_tensor(new_state, "new_state", 4, kDLFloat, 32);

  // Head counts come from the shapes (a qk16_v32 variant has the same math).
  const int64_t num_seqs = cu_seqlens.size(0) - 1;
  const int64_t num_qk_heads = q.size(1);
  const int64_t num_v_heads = v.size(1);
  const float out_scale = static_cast<float>(
      scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(q.size(2))) : scale);
  const float* state_ptr =
      state.has_value() ? static_cast<const float*>(state.value().data_ptr()) : nullptr;
  (void)num_seqs; (void)num_qk_heads; (void)num_v_heads; (void)out_scale; (void)state_ptr;

  // Launch on the caller's stream (torch's current stream during the call), never the default.
  cudaStream_t stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(output.device().device_type, output.device().device_id));
  (void)stream;

  // TODO(contestant): launch your kernel on `stream` and delete the line below.
  TVM_FFI_THROW(NotImplementedError)
      << "gdn_prefill CUDA template: the kernel is yours to write (kernel.cu::run)";
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
