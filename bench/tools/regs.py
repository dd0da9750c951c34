#!/usr/bin/env python3
"""Register counts of the benchmark kernels, per strategy, at build time.

For every registered strategy, compiles bench/src/alloc_bench.cu device-only
with `gpualloc-clang++ --gpualloc-strategy=NAME -Xcuda-ptxas -v` (the runtime
folded to that one strategy, as a single-allocator build would be) and reads
ptxas's report: registers, stack frame, spills. (The benchmark binaries are
unpinned: libgpualloc joins each module with the chosen strategy when it
loads, so their counts are measured on the GPU, by the regs test.)

Writes a CSV with the columns of gpualloc-bench's all.csv (test = regs,
mode = folded). Never fails the build: a strategy whose compile fails gets a
row with failures = 1 and the error in the note.
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

FIELDS = ["strategy", "test", "mode", "phase", "size", "size_max", "threads", "iters", "metric", "unit",
          "median", "min", "max", "reps", "failures", "note", "gpu", "suite"]
# The timed kernels (templates over their block source; only the heap_source
# instances use gpualloc) and the phase names their rows get, as the regs
# test of gpualloc-bench-alloc names them.
KERNELS = {"k_alloc_uniform": "alloc", "k_alloc_rule": "alloc_rule", "k_alloc_loaded": "alloc_loaded",
           "k_free": "free", "k_acd": "acd", "k_prob": "prob"}


def names(build):
    info = os.path.join(build, "bin", "gpualloc-info")
    if os.access(info, os.X_OK):
        try:
            out = subprocess.run([info, "--names"], capture_output=True, text=True, timeout=60)
            got = [t for t in re.split(r"[\s,]+", out.stdout) if t]
            if out.returncode == 0 and got:
                return got
        except (OSError, subprocess.TimeoutExpired):
            pass
    here = os.path.dirname(os.path.abspath(__file__))
    reg = os.path.join(here, "..", "..", "runtime", "include", "gpualloc", "registry.h")
    return re.findall(r'X\(\s*\w+\s*,\s*\w+\s*,\s*"([^"]+)"', open(reg).read())


def parse_ptxas(text):
    """kernel -> dict(registers, stack, spill_stores, spill_loads)."""
    out, cur, pending_props = {}, None, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = kernel_name(m.group(1))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            pending_props = kernel_name(m.group(1))
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and pending_props:
            d = out.setdefault(pending_props, {})
            d.update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
            pending_props = None
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out.setdefault(cur, {})["registers"] = int(m.group(1))
    return {k: v for k, v in out.items() if k in KERNELS}


def kernel_name(mangled):
    """The kernel's name, or None for a baseline instance (packed_source, bump_source)."""
    m = re.search(r"\d+(k_[a-z_]+)", mangled)
    if not m:
        return mangled
    source = re.search(r"(heap|packed|bump)_source", mangled)
    if source and source.group(1) != "heap":
        return None
    return m.group(1)


def compile_one(wrapper, source, strategy):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [wrapper, "-O2", "-std=c++20", "--cuda-device-only", "-c", source, "-o", os.path.join(tmp, "k.o"),
               "-Xcuda-ptxas", "-v"]
        cmd.insert(1, "--gpualloc-strategy=" + strategy)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wrapper", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = []
    for s in names(a.build):
        try:
            rc, text = compile_one(a.wrapper, a.source, s)
        except (OSError, subprocess.TimeoutExpired) as e:
            rc, text = 1, str(e)
        found = parse_ptxas(text) if rc == 0 else {}
        base = dict.fromkeys(FIELDS, "")
        base.update(strategy=s, test="regs", mode="folded", size=0, size_max=0,
                    threads=0, iters=0, reps=1, failures=0, suite="build")
        if not found:
            err = " | ".join(text.strip().splitlines()[-2:])[:300].replace(",", ";")
            rows.append(dict(base, phase="*", metric="registers", unit="regs", failures=1,
                             note=f"compile failed or no ptxas report: {err}"))
            print(f"regs.py: {s}: no register report (rc={rc})", file=sys.stderr)
            continue
        for k, phase in KERNELS.items():
            if k not in found:
                continue
            d = found[k]
            note = f"stack={d.get('stack', 0)} spill_stores={d.get('spill_stores', 0)} spill_loads={d.get('spill_loads', 0)}"
            v = d.get("registers", "")
            rows.append(dict(base, phase=phase, metric="registers", unit="regs", median=v, min=v, max=v, note=note))
            v = d.get("stack", "")
            rows.append(dict(base, phase=phase, metric="local", unit="B", median=v, min=v, max=v, note=note))
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
