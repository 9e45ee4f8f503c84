// The quantization kernels' fork-join (detail::parallel_chunks, detail::chunks_for_threads)
// lives with parallel_for in snip_core, on the one shared thread pool: snip/parallel.h.
#pragma once
#include "snip/parallel.h"
