# lit configuration of gpualloc's test suite.
#
# Parts: pass/ (the compiler pass on IR, FileCheck), wrapper/ (gpualloc-clang++
# on real .cu files), host/ (host unit and stress tests), gpu/ (end-to-end
# programs, prebuilt at build time, run on a GPU: REQUIRES: cuda-gpu).
# Features: clang (clang++ 22 is here: the compiler tests can run),
# cuda-gpu (a GPU answers nvidia-smi), libgpualloc (the host library is built).
import os
import shutil
import subprocess

import lit.formats

config.name = "gpualloc"
config.test_format = lit.formats.ShTest(execute_external=False)  # lit's internal shell
config.suffixes = [".ll", ".cu", ".cpp", ".test"]
config.excludes = ["Inputs", "utils", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.gpualloc_obj_root

build = config.gpualloc_build_root
bin_dir = os.path.join(build, "bin")
lib_dir = os.path.join(build, "lib")



def stand_in_tools():
    """Where LLVM is not installed (the GPU machine runs a copied build), FileCheck
    is the Python clone from PyPI (`filecheck`) and count a few lines of shell;
    not and env are built into lit's shell. Returns the folder of the stand-ins."""
    folder = os.path.join(config.gpualloc_obj_root, "stand-in-tools")
    os.makedirs(folder, exist_ok=True)
    scripts = {
        "FileCheck": '#!/bin/sh\nexec python3 -m filecheck "$@"\n',
        "count": '#!/bin/sh\n[ "$(wc -l)" -eq "$1" ]\n',
    }
    for name, text in scripts.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    lit_config.note("LLVM's FileCheck is not here: using the Python filecheck package")
    return folder


# The tools the RUN lines use: LLVM's (FileCheck, count, opt), CUDA's (nvlink
# for -fgpu-rdc links, cuobjdump), ours.
path = [bin_dir, config.llvm_tools_dir, os.path.join(config.cuda_path, "bin"), config.environment.get("PATH", "")]
if not os.path.exists(os.path.join(config.llvm_tools_dir, "FileCheck")):
    path.insert(1, stand_in_tools())
config.environment["PATH"] = os.pathsep.join(path + [os.environ.get("PATH", "")])
config.environment["LD_LIBRARY_PATH"] = os.pathsep.join([lib_dir, os.environ.get("LD_LIBRARY_PATH", "")])
for var in ["HOME", "TMPDIR", "CUDA_VISIBLE_DEVICES", "TSAN_OPTIONS", "PYTHONPATH"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]
# A test sets GPUALLOC_* itself; nothing from the caller's shell leaks in.
for var in list(config.environment):
    if var.startswith("GPUALLOC_"):
        del config.environment[var]

if os.path.exists(config.clangxx):
    config.available_features.add("clang")
if os.path.exists(os.path.join(lib_dir, "libgpualloc.so")):
    config.available_features.add("libgpualloc")


def gpu_present():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


if gpu_present():
    config.available_features.add("cuda-gpu")
if shutil.which("compute-sanitizer", path=config.environment["PATH"]):
    config.available_features.add("compute-sanitizer")
if shutil.which("ncu", path=config.environment["PATH"]):
    config.available_features.add("ncu")

python = shutil.which("python3") or "python3"
# `--param strategies=a,b` runs the GPU tests under those strategies only.
for_each_strategy = "%s %s --info %s" % (python, os.path.join(config.gpualloc_src_root, "tests", "utils", "for_each_strategy.py"), os.path.join(bin_dir, "gpualloc-info"))
if lit_config.params.get("strategies"):
    for_each_strategy += " --only " + lit_config.params["strategies"]
config.substitutions += [
    ("%clangxx", config.clangxx),
    ("%gpualloc-clangxx", os.path.join(bin_dir, "gpualloc-clang++")),
    ("%gpualloc-info", os.path.join(bin_dir, "gpualloc-info")),
    ("%opt", os.path.join(config.llvm_tools_dir, "opt")),
    ("%llvm-dis", os.path.join(config.llvm_tools_dir, "llvm-dis")),
    ("%pass-plugin", os.path.join(lib_dir, "gpualloc-pass.so")),
    ("%runtime-dir", os.path.join(lib_dir, "runtime")),
    ("%gpualloc-specialise", os.path.join(bin_dir, "gpualloc-specialise")),
    ("%libgpualloc", os.path.join(lib_dir, "libgpualloc.so")),
    ("%cuda-path", config.cuda_path),
    ("%arch", config.default_arch),
    ("%gpu-bin", os.path.join(config.gpualloc_obj_root, "gpu")),
    ("%bin", bin_dir),
    ("%lib", lib_dir),
    ("%for-each-strategy", for_each_strategy),
    ("%python", python),
]
