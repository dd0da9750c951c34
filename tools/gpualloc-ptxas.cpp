// gpualloc-ptxas: what gpualloc-clang++ runs in place of ptxas (clang's
// --ptxas-path, and for -fgpu-rdc links the ptxas of clang-nvlink-wrapper).
//
// A module that calls the runtime's entry points without defining them is
// unpinned: its strategy is chosen at run time. Such a module is assembled
// from carry(ptx) (specialise/unpinned_module.h): trapping stubs for the
// entry points, so it links and loads anywhere, and its own PTX in the global
// __gpualloc_ptx, from which libgpualloc builds the specialised module at load
// time. Every other module goes to ptxas untouched.
//
// Arguments are ptxas's own; the input is the last argument naming a .s or
// .ptx file. The real ptxas is $GPUALLOC_PTXAS, else the one of the CUDA
// toolkit gpualloc was built with.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "unpinned_module.h"

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The ptxas options that the JIT must repeat at load time.
gpualloc::jit_settings settings_of(const std::vector<std::string>& args) {
  gpualloc::jit_settings s;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string_view option) -> const char* {
      if (a == option && i + 1 < args.size()) return args[i + 1].c_str();
      if (a.size() > option.size() && a.compare(0, option.size(), option) == 0 && a[option.size()] == '=')
        return a.c_str() + option.size() + 1;
      return nullptr;
    };
    if (a.size() == 3 && a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '4') s.optimization = a[2] - '0';
    if (const char* v = value("--opt-level")) s.optimization = std::atoi(v);
    if (const char* v = value("-maxrregcount")) s.max_registers = std::atoi(v);
    if (const char* v = value("--maxrregcount")) s.max_registers = std::atoi(v);
    if (a == "-g" || a == "--device-debug") s.debug = true;
    if (a == "-lineinfo" || a == "--generate-line-info") s.line_info = true;
  }
  return s;
}

int run(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("gpualloc-ptxas: fork");
    return 1;
  }
  if (pid == 0) {
    execv(program.c_str(), argv.data());
    std::fprintf(stderr, "gpualloc-ptxas: cannot run %s: %s\n", program.c_str(), std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("GPUALLOC_PTXAS");
  const std::string ptxas = env != nullptr && *env != '\0' ? env : GPUALLOC_DEFAULT_PTXAS;
  std::vector<std::string> args(argv + 1, argv + argc);

  int input = -1;
  for (int i = static_cast<int>(args.size()) - 1; i >= 0 && input < 0; --i)
    if ((ends_with(args[i], ".s") || ends_with(args[i], ".ptx")) && access(args[i].c_str(), R_OK) == 0) input = i;
  if (input < 0) return run(ptxas, args);

  std::ifstream in(args[input], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string ptx = text.str();
  if (!gpualloc::calls_runtime_entry_points(ptx)) return run(ptxas, args);

  const std::string carried = args[input] + ".gpualloc.ptx";
  {
    std::ofstream out(carried, std::ios::binary);
    out << gpualloc::carry(ptx, settings_of(args));
    if (!out) {
      std::fprintf(stderr, "gpualloc-ptxas: cannot write %s\n", carried.c_str());
      return 1;
    }
  }
  args[input] = carried;
  const int status = run(ptxas, args);
  std::remove(carried.c_str());
  return status;
}
