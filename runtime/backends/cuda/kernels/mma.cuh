// One warp-wide tensor-core product (PTX mma.sync.m16n8k16, sm_80+): D += A B with A 16x16
// f16 row-major, B 16x8 f16 column-major, D 16x8 f32. Each lane holds pieces of the three
// matrices ("fragments", PTX ISA: Matrix Fragments for mma.m16n8k16 with .f16), g = lane / 4,
// t = lane % 4, two halves per u32 (lower column or row first):
//   a[0] = A[g][2t..2t+1]      a[1] = A[g+8][2t..2t+1]   a[2] = A[g][2t+8..]   a[3] = A[g+8][2t+8..]
//   b[0] = B[2t..2t+1][g]      b[1] = B[2t+8..2t+9][g]
//   d[0], d[1] = D[g][2t], D[g][2t+1]                     d[2], d[3] = D[g+8][2t], D[g+8][2t+1]
// ldmatrix_x4 loads four 8x8 f16 matrices from shared memory in that layout: lane l gives the
// address of row l % 8 of matrix l / 8 (16-byte aligned), and r[j] is the lane's piece of
// matrix j: row lane / 4, columns 2 (lane % 4) and + 1. ldmatrix_x4_trans loads the same
// matrices transposed: r[j] holds rows 2 (lane % 4) and + 1 of column lane / 4, the B fragment
// of a matrix stored k-major (row = k), as attention's V tile is.
// The emulator gathers the warp's fragments and computes the lane's four outputs in f32.
#pragma once
#include "common.cuh"

#ifdef EMULATOR
__device__ __forceinline__ void mma_16816(float* d, const u32* a, const u32* b) {
  u32 all_a[32][4], all_b[32][2];
  emu::exchange(a, all_a, sizeof(all_a[0]));
  emu::exchange(b, all_b, sizeof(all_b[0]));
  auto half_at = [](u32 w, int hi) { return f16_to_f32((u16)(hi ? w >> 16 : w & 0xFFFF)); };
  auto A = [&](int r, int c) {        // the lane holding A[r][c] and which of its words
    const int lane = 4 * (r % 8) + (c % 8) / 2, reg = (r >= 8) + 2 * (c >= 8);
    return half_at(all_a[lane][reg], c & 1);
  };
  auto B = [&](int k, int n) {
    const int lane = 4 * n + (k % 8) / 2, reg = k >= 8;
    return half_at(all_b[lane][reg], k & 1);
  };
  const int lane = emu::lane_id(), g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; i++) {
    const int r = g + 8 * (i / 2), n = 2 * t + i % 2;
    float s = 0.0f;
    for (int k = 0; k < 16; k++) s += A(r, k) * B(k, n);
    d[i] += s;
  }
}

__device__ __forceinline__ void ldmatrix_x4(u32* r, const __half* row) {
  const __half* rows[32];
  emu::exchange(&row, rows, sizeof(row));
  const int lane = emu::lane_id();
  for (int j = 0; j < 4; j++) r[j] = *reinterpret_cast<const u32*>(rows[8 * j + lane / 4] + 2 * (lane % 4));
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const __half* row) {
  const __half* rows[32];
  emu::exchange(&row, rows, sizeof(row));
  const int lane = emu::lane_id(), t = lane % 4, g = lane / 4;
  for (int j = 0; j < 4; j++) {
    const u16 lo = __half_as_ushort(rows[8 * j + 2 * t][g]), hi = __half_as_ushort(rows[8 * j + 2 * t + 1][g]);
    r[j] = (u32)lo | ((u32)hi << 16);
  }
}
#else
__device__ __forceinline__ void ldmatrix_x4(u32* r, const __half* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"((u32)__cvta_generic_to_shared(row)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const __half* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"((u32)__cvta_generic_to_shared(row)));
}

__device__ __forceinline__ void mma_16816(float* d, const u32* a, const u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
