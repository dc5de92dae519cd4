/* Portable build of kern.inc: any CPU gcc targets. */
#define NAME(x) x##_scalar
#include "kern.inc"
#include "merge.inc"
#include "kern_api.h"
KERN_API(scalar)
