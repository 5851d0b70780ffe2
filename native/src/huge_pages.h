// Anonymous memory on 2 MiB transparent huge pages: weights, the KV cache, the packed GEMM operands and the bandwidth
// probe stream through it (on 4 KiB pages the TLB misses and page-bounded prefetch stalls of those streams cost
// 10-30 % of their speed on Zen 3).
#pragma once

#include <cstddef>

namespace tsg {

/**
 * Maps `bytes` zeroed bytes 2 MiB aligned and advised for transparent huge pages before first touch
 * (MADV_HUGEPAGE; advisory: without THP the memory still works on 4 KiB pages). Returns nullptr when the memory
 * cannot be mapped (no exception); *mappedLen receives the length to pass to unmapHugePages.
 */
void* mapHugePages(size_t bytes, size_t* mappedLen);

/** Releases a mapping of mapHugePages (p, mappedLen as returned). */
void unmapHugePages(void* p, size_t mappedLen);

}  // namespace tsg
