// DSA top-k indexer (DeepSeek-V3.2), FP8: CUDA template, bound through apache-tvm-ffi.
//
// THIS IS A TEMPLATE. The signature, the input checks, the stream and the export line are ready;
// the kernels are yours to write. Until you do, `run` throws NotImplementedError so a benchmark
// run reports it plainly instead of comparing garbage.
//
// What to compute, per request b, over its first seq_lens[b] tokens t:
//   page_t  = block_table[b, t / 64], slot_t = t % 64
//   key_t   = fp8 key of (page_t, slot_t) * that token's fp32 scale
//   score_t = sum over heads h of relu(q_index_fp8[b, h, :] . key_t) * weights[b, h]
// then write the min(2048, seq_len) best tokens as global ids page_t * 64 + slot_t into
// topk_indices[b, :], and -1 in the remaining slots. Any order is accepted (the checker compares
// the scores of the chosen set), so a full sort is not needed: a radix select is enough.
//
// Hints: score with FP8 tensor-core MMAs (64 tokens x 64 heads x 128 per page), one block per
// (page, request); then one block per request selects the top 2048 from the scores.

#include <cuda_fp8.h>
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

// Your kernels go here, e.g. a scoring kernel over pages and a per-request selection kernel.
// The packed page (64 * 132 bytes): bytes [0, 64*128) are the FP8 keys, token-major;
// bytes [64*128, 64*132) are 64 float32 scales. Reinterpret, do not copy:
//   const __nv_fp8_e4m3* keys = reinterpret_cast<const __nv_fp8_e4m3*>(page_bytes);
//   const float* scales = reinterpret_cast<const float*>(page_bytes + 64 * 128);
__global__ void dsa_index_score_kernel(const __nv_fp8_e4m3* __restrict__ q,
                                       const uint8_t* __restrict__ k_cache,
                                       const float* __restrict__ weights,
                                       const int32_t* __restrict__ seq_lens,
                                       const int32_t* __restrict__ block_table,
                                       float* __restrict__ scores) {
  // TODO(contestant): the scores.
}

namespace {

void run(TensorView q_index_fp8,        // [batch, 64, 128] float8_e4m3fn, row-major
         TensorView k_index_cache_fp8,  // [num_pages, 64, 1, 132] int8: raw bytes of packed
                                        //   pages (see above), read them as uint8
         TensorView weights,            // [batch, 64] float32: per-head weights
         TensorView seq_lens,           // [batch] int32: tokens in each request
         TensorView block_table,        // [batch, max_num_pages] int32: page ids of a request,
                                        //   entries past its length are unspecified
         TensorView topk_indices) {     // [batch, 2048] int32, written by you (-1 padding)
  check_tensor(q_index_fp8, "q_index_fp8", 3, kDLFloat8_e4m3fn, 8);
  check_tensor(k_index_cache_fp8, "k_index_cache_fp8", 4, kDLInt, 8);
  check_tensor(weights, "weights", 2, kDLFloat, 32);
  check_tensor(seq_lens, "seq_lens", 1, kDLInt, 32);
  check_tensor(block_table, "block_table", 2, kDLInt, 32);
  check_tensor(topk_indices, "topk_indices", 2, kDLInt, 32);

  // Sizes come from the shapes.
  const int64_t batch = q_index_fp8.size(0);
  const int64_t num_heads = q_index_fp8.size(1);
  const int64_t max_num_pages = block_table.size(1);
  const int64_t topk = topk_indices.size(1);
  (void)batch; (void)num_heads; (void)max_num_pages; (void)topk;

  // Launch on the caller's stream (torch's current stream during the call), never the default.
  cudaStream_t stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(topk_indices.device().device_type, topk_indices.device().device_id));
  (void)stream;

  // TODO(contestant): launch your kernels on `stream` and delete the line below.
  TVM_FFI_THROW(NotImplementedError)
      << "dsa_topk_indexer CUDA template: the kernels are yours to write (kernel.cu::run)";
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
