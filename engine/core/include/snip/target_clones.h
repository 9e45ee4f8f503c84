// One binary, per-CPU kernels: SNIP_TARGET_CLONES on a (non-template, non-inline) function makes
// GCC compile it for AVX-512, AVX2 and the SSE2 baseline and pick one at load time (the default
// build has no -march). Kernels that use it must give the same bits in every clone: the same
// IEEE operations in the same order, no FMA contraction (their files are compiled with
// -ffp-contract=off) and no vectorized reductions (a sum over 4, 8 or 16 lanes rounds
// differently).
//
// ThreadSanitizer builds turn the clones off (SNIP_NO_TARGET_CLONES, top-level CMakeLists.txt):
// the ifunc resolvers run during relocation, before the TSan runtime is up, and the
// instrumented resolver crashes the program at start-up.
#pragma once

#if defined(SNIP_NO_TARGET_CLONES)
#define SNIP_TARGET_CLONES
#else
#define SNIP_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
