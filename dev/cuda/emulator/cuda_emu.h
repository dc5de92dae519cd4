// Host emulation of the CUDA C subset our kernels use, so they run on a CPU in tests.
//
// Each CUDA thread is a fiber with its own stack; the threads of one block run on one OS
// thread, switching only at __syncthreads, __syncwarp and warp shuffles, so shared memory
// (function-local statics here) and atomics need no locks. Blocks run one after another.
// A barrier that some threads of a block never reach is reported as a deadlock, which on a
// GPU would be a hang or undefined behaviour. This finds indexing, layout and barrier bugs;
// it cannot find data races between blocks or timing problems.
#pragma once
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector_types.h>
#include <vector_functions.h>

#define EMULATOR 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __constant__ static

namespace emu {
struct Fiber;
struct Dim { unsigned x, y, z; };
extern Fiber* cur;
extern Dim grid_dim, block_dim, block_idx;
extern unsigned char* dyn_smem;
Dim& thread_idx();
unsigned lane_id();
void sync_block();
void sync_warp();
void exchange(const void* mine, void* slots_out, int bytes);  // all lanes publish, all read
}  // namespace emu

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(emu::dyn_smem)

inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::sync_warp(); }
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T> T __shfl_sync(unsigned, T v, int src, int width = 32) {
  T all[32]; emu::exchange(&v, all, sizeof(T));
  unsigned lane = emu::lane_id();
  return all[(lane & ~(unsigned)(width - 1)) + (src & (width - 1))];
}
template <class T> T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  T all[32]; emu::exchange(&v, all, sizeof(T));
  unsigned lane = emu::lane_id(), src = lane ^ mask;
  return ((src & ~(unsigned)(width - 1)) == (lane & ~(unsigned)(width - 1))) ? all[src] : v;
}
template <class T> T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
  T all[32]; emu::exchange(&v, all, sizeof(T));
  unsigned lane = emu::lane_id(), src = lane + d;
  return ((lane & (width - 1)) + d < (unsigned)width) ? all[src] : v;
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
  T all[32]; emu::exchange(&v, all, sizeof(T));
  unsigned lane = emu::lane_id();
  return ((lane & (width - 1)) >= d) ? all[lane - d] : v;
}
inline unsigned __ballot_sync(unsigned, int pred) {
  int all[32]; int p = pred != 0; emu::exchange(&p, all, sizeof(int));
  unsigned r = 0; for (int i = 0; i < 32; i++) r |= (unsigned)all[i] << i; return r;
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) { return __ballot_sync(m, p) == 0xffffffffu; }

template <class T> T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <class T> T atomicMax(T* p, T v) { T old = *p; *p = std::max(old, v); return old; }
template <class T> T atomicMin(T* p, T v) { T old = *p; *p = std::min(old, v); return old; }
template <class T> T atomicExch(T* p, T v) { T old = *p; *p = v; return old; }
template <class T> T atomicCAS(T* p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; }

template <class T> inline T __ldg(const T* p) { return *p; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned char b[8]; memcpy(b, &x, 4); memcpy(b + 4, &y, 4);
  unsigned r = 0; for (int i = 0; i < 4; i++) r |= (unsigned)b[(s >> (4 * i)) & 7] << (8 * i); return r;
}
inline float __fmul_rn(float a, float b) { volatile float p = a * b; return p; }   // never fused into an FMA
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; i++) c += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return c;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
using std::min;
using std::max;

#include <utility>
namespace emu {
int register_kernel(const char* name, void (*fn)(void**));
template <class... A, size_t... I>
void invoke_impl(void (*f)(A...), void** a, std::index_sequence<I...>) { f(*static_cast<A*>(a[I])...); }
// Calls a kernel with cuLaunchKernel-style arguments: a[i] points to the i-th parameter.
template <class... A>
void invoke(void (*f)(A...), void** a) { invoke_impl(f, a, std::index_sequence_for<A...>{}); }
}  // namespace emu
