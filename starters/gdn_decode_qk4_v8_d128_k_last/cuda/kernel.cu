// Gated delta net decode (one token per request, k-last state) as a CUDA kernel for tvm-ffi.
//
// Per request b and value head h, with S that head's [V, K] fp32 state:
//   g    = exp(-exp(A_log[h]) * softplus(a[b, h] + dt_bias[h]))     decay gate
//   beta = sigmoid(b[b, h])                                         write strength
//   S    = g * S;   u = beta * (v - S k);   S = S + u k^T;   out = scale * S q
// q/k head h / (HV / HQ) serves value head h.
//
// Where the time goes: the state. Each (request, head) owns V * K * 4 bytes (64 KiB at 128 x
// 128) that are read once and written once; everything else is a few hundred bytes. So the
// kernel is a streaming pass built around one idea: a warp owns whole state rows. A row of
// K = 128 floats is exactly one float4 per lane, and every quantity a row needs (S k, S q) is
// a warp reduction, so no shared memory and no __syncthreads are needed. Each warp loads all
// of its ROWS rows before doing any math, so ROWS x 512 bytes per warp are in flight at once;
// that is what hides DRAM latency. The two dot products of a row are reduced together, using
//   q . (g S + u k) = q . (g S) + u (q . k),
// so the row is touched once on the way in and once on the way out.
//
// Binding: exported as `run` with destination-passing style, in the definition's order:
//   run(q, k, v, state (optional), A_log, a, dt_bias, b, scale, output, new_state)
// Floats arrive as double, optional tensors as Optional<TensorView>; the stream is the
// caller's current one (TVMFFIEnvGetStream).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

namespace {

using tvm::ffi::Optional;
using tvm::ffi::TensorView;

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 4;

struct DecodeParams {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const float* state;  // nullptr: the state input is absent and starts as zeros
  const float* a_log;
  const __nv_bfloat16* a;
  const float* dt_bias;
  const __nv_bfloat16* b;
  __nv_bfloat16* out;
  float* new_state;
  float scale;
  int num_v_heads;
  int group;  // value heads per q/k head
  int v_rows;
  int64_t stride_q_b, stride_q_h, stride_k_b, stride_k_h, stride_v_b, stride_v_h;
  int64_t stride_a_b, stride_b_b, stride_o_b, stride_o_h;
};

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;
}

__device__ __forceinline__ float softplus(float x) {
  // Same cut-over as torch.nn.functional.softplus (beta=1, threshold=20).
  return x > 20.f ? x : log1pf(expf(x));
}

// Four consecutive bf16 values -> float4 (one 8-byte load).
__device__ __forceinline__ float4 load_bf16x4(const __nv_bfloat16* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

__device__ __forceinline__ float dot4(float4 x, float4 y) {
  return x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}

// KV4: float4s per lane per row (K = 128 * KV4). ROWS: state rows per warp.
template <int KV4, int ROWS>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    gdn_decode_kernel(const DecodeParams p) {
  constexpr int K = KV4 * 4 * kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;

  // --- which (request, head) and which rows this warp owns -----------------------------------
  const int rows_per_block = kWarpsPerBlock * ROWS;
  const int blocks_per_head = (p.v_rows + rows_per_block - 1) / rows_per_block;
  const int64_t head_index = blockIdx.x / blocks_per_head;  // = request * HV + head
  const int row0 = (blockIdx.x % blocks_per_head) * rows_per_block + warp * ROWS;
  if (row0 >= p.v_rows) return;  // ragged tail; no block-level sync follows
  const int64_t i_b = head_index / p.num_v_heads;
  const int i_h = static_cast<int>(head_index % p.num_v_heads);
  const int i_qk = i_h / p.group;
  const int64_t state_offset = (head_index * p.v_rows + row0) * K;

  // --- issue the state loads first: they are the whole cost, everything else hides under them
  float4 s[ROWS][KV4];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
#pragma unroll
    for (int c = 0; c < KV4; ++c) {
      const bool live = p.state != nullptr && row0 + r < p.v_rows;
      s[r][c] = live ? __ldcs(reinterpret_cast<const float4*>(
                           p.state + state_offset + r * K + (c * kWarpSize + lane) * 4))
                     : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }

  // --- the token's q and k (the lane's slice of K), the gates ---------------------------------
  float4 kf[KV4], qf[KV4];
  float qk = 0.f;
#pragma unroll
  for (int c = 0; c < KV4; ++c) {
    const int col = (c * kWarpSize + lane) * 4;
    kf[c] = load_bf16x4(p.k + i_b * p.stride_k_b + i_qk * p.stride_k_h + col);
    qf[c] = load_bf16x4(p.q + i_b * p.stride_q_b + i_qk * p.stride_q_h + col);
    qk += dot4(qf[c], kf[c]);
  }
  const float a = __bfloat162float(p.a[i_b * p.stride_a_b + i_h]);
  const float b = __bfloat162float(p.b[i_b * p.stride_b_b + i_h]);
  const float g = expf(-expf(p.a_log[i_h]) * softplus(a + p.dt_bias[i_h]));
  const float beta = 1.f / (1.f + expf(-b));

  // --- decay each row, then one butterfly reduction for all (S k, S q) pairs and q . k --------
  float sk[ROWS], sq[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    sk[r] = 0.f;
    sq[r] = 0.f;
#pragma unroll
    for (int c = 0; c < KV4; ++c) {
      s[r][c].x *= g;
      s[r][c].y *= g;
      s[r][c].z *= g;
      s[r][c].w *= g;
      sk[r] += dot4(s[r][c], kf[c]);
      sq[r] += dot4(s[r][c], qf[c]);
    }
  }
  qk = warp_sum(qk);
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    sk[r] = warp_sum(sk[r]);
    sq[r] = warp_sum(sq[r]);
  }

  // --- rank-1 write, output, and the streaming store of the new rows --------------------------
  const __nv_bfloat16* v_row = p.v + i_b * p.stride_v_b + i_h * p.stride_v_h;
  __nv_bfloat16* out_row = p.out + i_b * p.stride_o_b + i_h * p.stride_o_h;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int row = row0 + r;
    if (row >= p.v_rows) break;
    const float u = beta * (__bfloat162float(v_row[row]) - sk[r]);
#pragma unroll
    for (int c = 0; c < KV4; ++c) {
      float4 x = s[r][c];
      x.x += u * kf[c].x;
      x.y += u * kf[c].y;
      x.z += u * kf[c].z;
      x.w += u * kf[c].w;
      __stcs(reinterpret_cast<float4*>(p.new_state + state_offset + r * K +
                                       (c * kWarpSize + lane) * 4),
             x);
    }
    if (lane == 0) out_row[row] = __float2bfloat16(p.scale * (sq[r] + u * qk));
  }
}

template <int KV4>
void launch(const DecodeParams& p, int64_t num_heads_total, cudaStream_t stream) {
  // Rows per warp: enough programs to cover every SM at small batch (1 row per warp), more
  // bytes in flight per warp once there are plenty of heads.
  const int64_t rows_total = num_heads_total * p.v_rows;
  const dim3 block(kWarpsPerBlock * kWarpSize);
  auto grid_for = [&](int rows) {
    const int per_block = kWarpsPerBlock * rows;
    return dim3(static_cast<unsigned>(num_heads_total * ((p.v_rows + per_block - 1) / per_block)));
  };
  if (rows_total >= 16384) {
    gdn_decode_kernel<KV4, 4><<<grid_for(4), block, 0, stream>>>(p);
  } else if (rows_total >= 4096) {
    gdn_decode_kernel<KV4, 2><<<grid_for(2), block, 0, stream>>>(p);
  } else {
    gdn_decode_kernel<KV4, 1><<<grid_for(1), block, 0, stream>>>(p);
  }
}

void check_tensor(const TensorView& t, const char* name, int ndim, DLDataTypeCode code, int bits) {
  if (t.ndim() != ndim || t.dtype().code != code || t.dtype().bits != bits) {
    TVM_FFI_THROW(ValueError) << "gdn decode: " << name << " must be a " << ndim << "-d "
                              << (code == kDLBfloat ? "bfloat16" : "float32") << " tensor";
  }
  if (t.device().device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << "gdn decode: " << name << " must be on a CUDA device";
  }
}

void gdn_decode(TensorView q, TensorView k, TensorView v, Optional<TensorView> state,
                TensorView A_log, TensorView a, TensorView dt_bias, TensorView b, double scale,
                TensorView output, TensorView new_state) {
  check_tensor(q, "q", 4, kDLBfloat, 16);
  check_tensor(k, "k", 4, kDLBfloat, 16);
  check_tensor(v, "v", 4, kDLBfloat, 16);
  check_tensor(A_log, "A_log", 1, kDLFloat, 32);
  check_tensor(a, "a", 3, kDLBfloat, 16);
  check_tensor(dt_bias, "dt_bias", 1, kDLFloat, 32);
  check_tensor(b, "b", 3, kDLBfloat, 16);
  check_tensor(output, "output", 4, kDLBfloat, 16);
  check_tensor(new_state, "new_state", 4, kDLFloat, 32);

  // Sizes come from the shapes, so other head counts work unchanged.
  const int64_t batch = q.size(0);
  const int64_t num_qk_heads = q.size(2);
  const int64_t head_k = q.size(3);
  const int64_t num_v_heads = v.size(2);
  const int64_t head_v = v.size(3);
  if (q.size(1) != 1 || num_v_heads % num_qk_heads != 0) {
    TVM_FFI_THROW(ValueError) << "gdn decode: expects one token per request and HV % HQ == 0";
  }
  if (head_k != 128 && head_k != 256) {
    TVM_FFI_THROW(ValueError) << "gdn decode: head size K must be 128 or 256 (a warp holds one "
                                 "state row as float4 per lane), got "
                              << head_k;
  }
  // The kernel indexes q/k/v rows and the state as dense rows: check the strides it relies on.
  if (q.stride(3) != 1 || k.stride(3) != 1 || v.stride(3) != 1 || !new_state.IsContiguous() ||
      (state.has_value() && !state.value().IsContiguous())) {
    TVM_FFI_THROW(ValueError) << "gdn decode: q, k, v need a unit last stride and the state "
                                 "tensors must be contiguous";
  }
  if (state.has_value()) check_tensor(state.value(), "state", 4, kDLFloat, 32);
  if (batch == 0) return;

  DecodeParams p;
  p.q = static_cast<const __nv_bfloat16*>(q.data_ptr());
  p.k = static_cast<const __nv_bfloat16*>(k.data_ptr());
  p.v = static_cast<const __nv_bfloat16*>(v.data_ptr());
  p.state = state.has_value() ? static_cast<const float*>(state.value().data_ptr()) : nullptr;
  p.a_log = static_cast<const float*>(A_log.data_ptr());
  p.a = static_cast<const __nv_bfloat16*>(a.data_ptr());
  p.dt_bias = static_cast<const float*>(dt_bias.data_ptr());
  p.b = static_cast<const __nv_bfloat16*>(b.data_ptr());
  p.out = static_cast<__nv_bfloat16*>(output.data_ptr());
  p.new_state = static_cast<float*>(new_state.data_ptr());
  p.scale = scale == 0.0 ? static_cast<float>(1.0 / sqrt(static_cast<double>(head_k)))
                         : static_cast<float>(scale);
  p.num_v_heads = static_cast<int>(num_v_heads);
  p.group = static_cast<int>(num_v_heads / num_qk_heads);
  p.v_rows = static_cast<int>(head_v);
  p.stride_q_b = q.stride(0);
  p.stride_q_h = q.stride(2);
  p.stride_k_b = k.stride(0);
  p.stride_k_h = k.stride(2);
  p.stride_v_b = v.stride(0);
  p.stride_v_h = v.stride(2);
  p.stride_a_b = a.stride(0);
  p.stride_b_b = b.stride(0);
  p.stride_o_b = output.stride(0);
  p.stride_o_h = output.stride(2);

  const DLDevice dev = q.device();
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(dev.device_type, dev.device_id));
  if (head_k == 128) {
    launch<1>(p, batch * num_v_heads, stream);
  } else {
    launch<2>(p, batch * num_v_heads, stream);
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << "gdn decode: launch failed: " << cudaGetErrorString(err);
  }
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, gdn_decode);
