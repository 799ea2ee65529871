// DSA sparse attention (DeepSeek-V3.2): CUDA template, bound through apache-tvm-ffi.
//
// THIS IS A TEMPLATE. The signature, the input checks, the stream and the export line are ready;
// the kernel is yours to write. Until you do, `run` throws NotImplementedError so a benchmark run
// reports it plainly instead of comparing garbage.
//
// What to compute, per query token t and head h, over the selected cache tokens j of t
// (sparse_indices[t, :], flat ids page * 64 + slot, -1 = padding to ignore):
//   logit_j     = (q_nope[t, h, :] . ckv[j, :] + q_pe[t, h, :] . kpe[j, :]) * sm_scale
//   output[t,h] = sum_j softmax(logit)_j * ckv[j, :]        (the ckv rows are also the values)
//   lse[t, h]   = log2(sum_j exp(logit_j))                   (base-2 log-sum-exp)
// A token with no valid index gets output 0 and lse -inf. Accumulate in fp32.
//
// Hints: the work is a gather of 2048 rows of 1152 bytes per token; read each row once for all
// 16 heads, and split the 2048 selections over several blocks (1-8 tokens per workload) with a
// log-sum-exp merge at the end.

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cstdint>

namespace {

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

// Your kernel goes here. One possible split: grid = (num_tokens, num_splits), one block handles
// all heads of one token over a slice of its selections and writes a partial (output, lse).
__global__ void dsa_sparse_attention_kernel(const __nv_bfloat16* __restrict__ q_nope,
                                            const __nv_bfloat16* __restrict__ q_pe,
                                            const __nv_bfloat16* __restrict__ ckv_cache,
                                            const __nv_bfloat16* __restrict__ kpe_cache,
                                            const int32_t* __restrict__ sparse_indices,
                                            float sm_scale, __nv_bfloat16* __restrict__ output,
                                            float* __restrict__ lse) {
  // TODO(contestant): the attention itself.
}

namespace {

void run(TensorView q_nope,          // [num_tokens, 16, 512] bf16, row-major
         TensorView q_pe,            // [num_tokens, 16, 64] bf16, row-major
         TensorView ckv_cache,       // [num_pages, 64, 512] bf16: page, slot, dim
         TensorView kpe_cache,       // [num_pages, 64, 64] bf16: page, slot, dim
         TensorView sparse_indices,  // [num_tokens, 2048] int32: page * 64 + slot, -1 = padding
         double sm_scale,            // softmax scale (a Python float arrives as double)
         TensorView output,          // [num_tokens, 16, 512] bf16, written by you
         TensorView lse) {           // [num_tokens, 16] float32, written by you (base 2)
  check_tensor(q_nope, "q_nope", 3, kDLBfloat, 16);
  check_tensor(q_pe, "q_pe", 3, kDLBfloat, 16);
  check_tensor(ckv_cache, "ckv_cache", 3, kDLBfloat, 16);
  check_tensor(kpe_cache, "kpe_cache", 3, kDLBfloat, 16);
  check_tensor(sparse_indices, "sparse_indices", 2, kDLInt, 32);
  check_tensor(output, "output", 3, kDLBfloat, 16);
  check_tensor(lse, "lse", 2, kDLFloat, 32);

  // Sizes come from the shapes, so the kernel also serves other head counts.
  const int64_t num_tokens = q_nope.size(0);
  const int64_t num_heads = q_nope.size(1);
  const int64_t page_size = ckv_cache.size(1);
  const int64_t topk = sparse_indices.size(1);
  (void)num_tokens; (void)num_heads; (void)page_size; (void)topk; (void)sm_scale;

  // Launch on the caller's stream (torch's current stream during the call), never the default.
  cudaStream_t stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(output.device().device_type, output.device().device_id));
  (void)stream;

  // TODO(contestant): launch your kernel, e.g.
  //   dsa_sparse_attention_kernel<<<grid, block, smem, stream>>>(...data_ptr()...);
  // and delete the line below.
  TVM_FFI_THROW(NotImplementedError)
      << "dsa_sparse_attention CUDA template: the kernel is yours to write (kernel.cu::run)";
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
