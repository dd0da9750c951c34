#!/usr/bin/env python3
"""Runs one test program under every registered strategy.

Usage: for_each_strategy.py --info <gpualloc-info> [--timeout S] [--only NAMES] [--jobs N] -- program args...

The strategy names come from the registry through gpualloc-info, so a new
strategy is tested without editing any test. Each run gets
GPUALLOC_STRATEGY=<name> and its own time limit (a hung allocator fails its
run, the others still run). --jobs runs that many strategies at once: the
first load of a program under a strategy is the driver compiling its joined
module (seconds, on the CPU), which runs in parallel where the GPU work is
small. Prints one line per strategy, in registry order, and exits non-zero
if any run failed.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--info", required=True, help="path of gpualloc-info")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per strategy")
    parser.add_argument("--only", default="", help="comma-separated subset of strategies")
    parser.add_argument("--jobs", type=int, default=1, help="strategies run at once")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no program to run")

    names = subprocess.run([args.info, "--names"], check=True, capture_output=True, text=True).stdout.split()
    if args.only:
        wanted = args.only.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:
            parser.error("not registered: " + ", ".join(unknown))
        names = [n for n in names if n in wanted]

    def run_one(name):
        env = dict(os.environ, GPUALLOC_STRATEGY=name)
        start = time.monotonic()
        try:
            run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
            status = "ok" if run.returncode == 0 else "FAILED (exit %d)" % run.returncode
            output = run.stdout + run.stderr
        except subprocess.TimeoutExpired as e:
            status = "FAILED (timed out after %gs)" % args.timeout
            output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        return status, output, time.monotonic() - start

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, (status, output, elapsed) in zip(names, pool.map(run_one, names)):
            print("strategy %-12s %s in %.1fs" % (name, status, elapsed), flush=True)
            if status != "ok":
                failed.append(name)
                sys.stdout.write("".join("  | " + line + "\n" for line in output.splitlines()[-40:]))
    print("%d strategies: %d passed, %d failed" % (len(names), len(names) - len(failed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
