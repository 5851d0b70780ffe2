// Huge-page mappings (see huge_pages.h).
#include "huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace tsg {

void* mapHugePages(size_t bytes, size_t* mappedLen) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  // over-map by one huge page so the start can be aligned, then give the unaligned ends back. No MAP_NORESERVE:
  // under strict overcommit the mapping fails here instead of faulting later when the memory is first written.
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHuge - 1) & ~(kHuge - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + len + kHuge;
  if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  madvise(p, len, MADV_HUGEPAGE);
#endif
  *mappedLen = len;
  return p;
}

void unmapHugePages(void* p, size_t mappedLen) {
  munmap(p, mappedLen);
}

}  // namespace tsg
