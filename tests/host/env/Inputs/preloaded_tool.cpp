// Stands in for a profiler's launcher or injection library preloaded into
// the program (Nsight Compute's, compute-sanitizer's): it interposes dlopen,
// and reports each call that libgpualloc makes to it. preloaded_tool.test.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

extern "C" void* dlopen(const char* file, int flags) {
  using dlopen_fn = void* (*)(const char*, int);
  static dlopen_fn real = reinterpret_cast<dlopen_fn>(dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34"));
  if (real == nullptr) real = reinterpret_cast<dlopen_fn>(dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5"));
  Dl_info caller;
  if (dladdr(__builtin_return_address(0), &caller) != 0 && caller.dli_fname != nullptr &&
      std::strstr(caller.dli_fname, "libgpualloc") != nullptr)
    std::fprintf(stderr, "tool: libgpualloc called the preloaded dlopen(\"%s\")\n", file != nullptr ? file : "");
  return real(file, flags);
}
