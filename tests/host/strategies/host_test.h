// What the host strategy tests share: whether this build runs under
// ThreadSanitizer (HOST_TEST_TSAN: 1 or 0), a small, fast random generator
// (splitmix64) that each thread seeds for itself, and the parts tests'
// CHECK (called by one thread at a time; harness.h has its own FAIL).
#pragma once

#include <cstdint>
#include <cstdio>

#if defined(__SANITIZE_THREAD__)
#define HOST_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOST_TEST_TSAN 1
#endif
#endif
#ifndef HOST_TEST_TSAN
#define HOST_TEST_TSAN 0
#endif

namespace host_test {

struct rng {
  std::uint64_t s;
  explicit rng(std::uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
};

inline int failures = 0;  // CHECKs that failed

}  // namespace host_test

// Counts and prints a failure unless cond holds.
#define CHECK(cond, ...)                 \
  do {                                   \
    if (!(cond)) {                       \
      std::fprintf(stderr, "FAILED: ");  \
      std::fprintf(stderr, __VA_ARGS__); \
      std::fprintf(stderr, "\n");        \
      ++::host_test::failures;           \
    }                                    \
  } while (0)
