// Helpers shared by every kernel: fixed-width types (NVRTC has no <cstdint>), warp and
// block reductions, f16/bf16 conversions and the dynamic shared memory declaration.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#ifndef EMULATOR
#define DYNAMIC_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

#define FULL_MASK 0xffffffffu

// Programmatic dependent launch (sm_90; no-ops elsewhere and in the emulator). Inside a
// captured decode step every kernel is launched so that it may start while the kernel before
// it is still running (device.py). Before pdl_wait() a kernel may only read what the step
// does not write (weights, block tables, the cache of earlier steps) and must write nothing;
// pdl_wait() returns once the previous kernel has finished and its writes are visible.
// pdl_launch() then lets the next kernel's blocks start on free SMs: called after the wait, so
// at most two kernels ever overlap. Every extern "C" kernel calls pdl_wait() (a CPU test checks).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(EMULATOR)
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch() { asm volatile("griddepcontrol.launch_dependents;" :::); }
#else
__device__ __forceinline__ void pdl_wait() {}
__device__ __forceinline__ void pdl_launch() {}
#endif

// Ask L2 (or this SM's L1) for the 128-byte lines of [p, p + bytes): data a kernel reads
// after pdl_wait() streams in while the previous kernel finishes. A thread asks for lines
// first, first + step, ..., so the threads of a warp (or team) share the range.
template <bool L1 = false>
__device__ __forceinline__ void prefetch_lines(const void* p, long long bytes, int first = 0, int step = 1) {
#if defined(__CUDA_ARCH__) && !defined(EMULATOR)
  const char* c = static_cast<const char*>(p);
  for (long long off = 128LL * first; off < bytes; off += 128LL * step) {
    if (L1) asm volatile("prefetch.global.L1 [%0];" ::"l"(c + off));
    else asm volatile("prefetch.global.L2 [%0];" ::"l"(c + off));
  }
#endif
}
// 16 bytes global -> shared without passing through registers (cp.async, sm_80), so a tile's
// copy is in flight while the threads do other work. cp_async_commit() closes this thread's
// group of copies; cp_async_wait<N>() waits until at most N of its groups are still pending.
__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(EMULATOR)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((u32)__cvta_generic_to_shared(smem)), "l"(global));
#else
  *reinterpret_cast<uint4*>(smem) = *reinterpret_cast<const uint4*>(global);
#endif
}
// 4 bytes (through L1: cp.async's 16-byte form only skips it), for rows not 16-byte aligned.
__device__ __forceinline__ void cp_async4(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(EMULATOR)
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((u32)__cvta_generic_to_shared(smem)), "l"(global));
#else
  *reinterpret_cast<u32*>(smem) = *reinterpret_cast<const u32*>(global);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(EMULATOR)
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(EMULATOR)
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `red` holds >= 32 floats of shared
// memory and may be reused right after the call returns.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : NEG_INF;
  return warp_max(v);
}

// atomicAdd with acquire-release semantics at GPU scope: after a __syncthreads(), thread 0's
// add publishes the block's earlier writes and sees those of the blocks that added before it
// (the split-K "last block combines" handshake, without a full __threadfence()).
__device__ __forceinline__ int atomic_add_acq_rel(int* p, int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(EMULATOR)
  int old;
  asm volatile("atom.acq_rel.gpu.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
#else
  return atomicAdd(p, v);
#endif
}

// A load that skips L1 (data another block of this grid wrote: split-K partials).
template <class T> __device__ __forceinline__ T ldcg(const T* p) {
#ifdef EMULATOR
  return *p;
#else
  return __ldcg(p);
#endif
}

__device__ __forceinline__ float f16_to_f32(u16 h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float((u32)h << 16); }

// Two floats as the halves of a u32 (a in the low half): an f16 pair of a tensor-core fragment.
__device__ __forceinline__ u32 pack_half2(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const u32*>(&h);
}

// Storage type of the KV cache and of activations handed to cuBLAS.
template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// (value, index) maximum with the lowest index winning ties, like torch.argmax.
__device__ __forceinline__ void argmax_merge(float& v, int& i, float v2, int i2) {
  if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
}

__device__ __forceinline__ void block_argmax(float& v, int& i, float* redv, int* redi) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(FULL_MASK, v, o);
    const int i2 = __shfl_xor_sync(FULL_MASK, i, o);
    argmax_merge(v, i, v2, i2);
  }
  __syncthreads();
  if (lane == 0) { redv[warp] = v; redi[warp] = i; }
  __syncthreads();
  v = lane < nwarps ? redv[lane] : NEG_INF;
  i = lane < nwarps ? redi[lane] : 0x7fffffff;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(FULL_MASK, v, o);
    const int i2 = __shfl_xor_sync(FULL_MASK, i, o);
    argmax_merge(v, i, v2, i2);
  }
}

__device__ __forceinline__ double block_sum_d(double v, double* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < nwarps ? red[lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}
