#!/usr/bin/env python3
"""Registers and local memory of user kernels under the run-time choice of
strategy, against the same kernels folded to that strategy.

Usage: register_parity.py --build BUILD [--arch sm_90] [--slack 4] [--strategies a,b] SOURCE...

For each source, compiles the device code once without a pin (the module
libgpualloc specialises at load time) and, for every registered strategy:
  run time: gpualloc-specialise --strategy NAME (libgpualloc's own join of
            the module's PTX with NAME's runtime), then ptxas -v, with the
            module's -O level, for the same GPU;
  folded:   gpualloc-clang++ --gpualloc-strategy=NAME, ptxas -v.
Fails when a kernel's registers at run time exceed the folded build's by more
than --slack, its spills exceed the folded build's, or its stack frame the
folded build's by more than 16 bytes. Prints
a table, with the module sizes (PTX bytes, cubin bytes) of both builds.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        sys.stderr.write("command failed: %s\n%s%s" % (" ".join(cmd), out.stdout, out.stderr))
        sys.exit(1)
    return out.stdout + out.stderr


def parse_ptxas(text):
    """entry name -> (registers, stack frame bytes, spill bytes)."""
    kernels, name, frame = {}, None, {}
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            frame["current"] = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and frame.get("current") == name:
            frame[name] = (int(m.group(1)), int(m.group(2)) + int(m.group(3)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            stack, spill = frame.get(name, (0, 0))
            kernels[name] = (int(m.group(1)), stack, spill)
    return kernels


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", required=True)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--slack", type=int, default=4)
    p.add_argument("--strategies", default="")
    p.add_argument("--ptxas", default="ptxas")
    p.add_argument("sources", nargs="+")
    a = p.parse_args()
    wrapper = os.path.join(a.build, "bin", "gpualloc-clang++")
    specialise = os.path.join(a.build, "bin", "gpualloc-specialise")
    names = run([os.path.join(a.build, "bin", "gpualloc-info"), "--names"]).split()
    if a.strategies:
        names = [n for n in names if n in a.strategies.split(",")]
    common = ["-O2", "-std=c++17", "--cuda-device-only", "-c", "--offload-arch=" + a.arch]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        print("%-16s %-14s %-28s %9s %9s %9s %11s %11s" % ("source", "strategy", "kernel", "regs rt", "folded",
                                                          "stack rt", "stack fold", "cubin rt/fold"))
        for source in a.sources:
            base = os.path.splitext(os.path.basename(source))[0]
            unpinned = os.path.join(tmp, base + ".cubin")
            run([wrapper] + common + [source, "-o", unpinned])
            for name in names:
                joined = os.path.join(tmp, "%s.%s.ptx" % (base, name))
                run([specialise, "--strategy", name, unpinned, "-o", joined])
                rt_cubin = joined + ".cubin"
                rt = parse_ptxas(run([a.ptxas, "-v", "-O2", "-arch=" + a.arch, joined, "-o", rt_cubin]))
                folded_cubin = os.path.join(tmp, "%s.%s.folded.cubin" % (base, name))
                folded = parse_ptxas(run([wrapper] + common + ["--gpualloc-strategy=" + name, "-Xcuda-ptxas", "-v",
                                                               source, "-o", folded_cubin]))
                sizes = "%d/%d" % (os.path.getsize(rt_cubin), os.path.getsize(folded_cubin))
                for kernel in sorted(folded):
                    if kernel not in rt:
                        print("FAILED: %s %s: kernel %s missing from the run-time build" % (base, name, kernel))
                        failures += 1
                        continue
                    (rr, rs, rp), (fr, fs, fp) = rt[kernel], folded[kernel]
                    bad = rr > fr + a.slack or rs > fs + 16 or rp > fp
                    failures += bad
                    print("%-16s %-14s %-28s %9d %9d %9d %11d %11s%s" % (base, name, kernel[:28], rr, fr, rs, fs,
                                                                       sizes, "  FAILED" if bad else ""))
    print("%d kernel(s) over the folded build" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
