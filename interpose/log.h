// Settings of this process and messages to stderr.
//
// Every message starts with "gpualloc: ". verbose() prints only with
// GPUALLOC_VERBOSE=1. settings() is parsed once (library.cpp); a bad
// GPUALLOC_* variable ends the process there with status 1.
#pragma once

#include <cstdio>

#include "env.h"

namespace gpualloc::interpose {

const env::config& settings();

#define GPUALLOC_LOG(...)                    \
  do {                                       \
    std::fprintf(stderr, "gpualloc: ");      \
    std::fprintf(stderr, __VA_ARGS__);       \
    std::fputc('\n', stderr);                \
  } while (0)

#define GPUALLOC_VERBOSE(...)                                         \
  do {                                                                \
    if (::gpualloc::interpose::settings().verbose) GPUALLOC_LOG(__VA_ARGS__); \
  } while (0)

}  // namespace gpualloc::interpose
