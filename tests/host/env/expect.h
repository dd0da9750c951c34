// A minimal check for the host unit tests: counts failures, keeps going.
#pragma once
#include <cstdio>

inline int failures = 0;

#define CHECK(cond)                                                 \
  do {                                                              \
    if (!(cond)) {                                                  \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
      ++failures;                                                   \
    }                                                               \
  } while (0)
