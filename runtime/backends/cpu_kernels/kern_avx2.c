/* AVX2 + FMA build of kern.inc, for x86 machines without AVX512-VNNI. */
#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c,bmi2")
#include <immintrin.h>
#define ISA_AVX2 1
#define NAME(x) x##_avx2
#include "kern.inc"
#include "merge.inc"
#include "kern_api.h"
KERN_API(avx2)
#endif
