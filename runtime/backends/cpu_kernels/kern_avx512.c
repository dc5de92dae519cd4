/* AVX512-VNNI build of kern.inc (vpdpbusd: 64 u8 x s8 products a instruction). */
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c,bmi2")
#include <immintrin.h>
#define ISA_AVX512 1
#define NAME(x) x##_avx512
#include "kern.inc"
#include "merge.inc"
#include "kern_api.h"
KERN_API(avx512)
#endif
