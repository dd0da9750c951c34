// Stands in for a profiler's launcher or injection library preloaded into
// the program (Nsight Compute's, compute-sanitizer's): it interposes dlopen,
// and reports each call that libgpualloc makes to it; like Nsight Compute's
// injection it also exports the driver's resolver, cuGetProcAddress_v2,
// forwarding to the function dlsym finds for that name in libcuda (or, with
// TOOL_LOOKUP=next, after the tool: RTLD_NEXT).
// preloaded_tool.test.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
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

// The driver's signature (cuda.h), in plain types.
extern "C" int cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long flags,
                                   void* status) {
  using resolver = int (*)(const char*, void**, int, unsigned long long, void*);
  // TOOL_LOOKUP=next: the next definition after the tool (RTLD_NEXT), else libcuda's through its handle.
  static resolver next = reinterpret_cast<resolver>(
      std::getenv("TOOL_LOOKUP") != nullptr && std::strcmp(std::getenv("TOOL_LOOKUP"), "next") == 0
          ? dlsym(RTLD_NEXT, "cuGetProcAddress_v2")
          : dlsym(dlopen("libcuda.so.1", RTLD_NOW), "cuGetProcAddress_v2"));
  if (next == nullptr) {
    std::fprintf(stderr, "tool: no cuGetProcAddress_v2 to forward to\n");
    return 999;
  }
  if (next == reinterpret_cast<resolver>(&cuGetProcAddress_v2)) {
    std::fprintf(stderr, "tool: libgpualloc handed the tool its own cuGetProcAddress_v2\n");
    return 999;  // CUDA_ERROR_UNKNOWN
  }
  Dl_info where;
  if (dladdr(reinterpret_cast<void*>(next), &where) != 0 && where.dli_fname != nullptr &&
      std::strstr(where.dli_fname, "libgpualloc") != nullptr) {
    std::fprintf(stderr, "tool: libgpualloc handed the tool its own wrapper, which forwards to the tool\n");
    return 999;
  }
  return next(symbol, pfn, version, flags, status);
}
