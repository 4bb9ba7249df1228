#!/usr/bin/env python3
"""How fast this machine hands out fresh memory: maps GIB of anonymous memory, writes one byte
per 4 KiB page, then does it again, and prints both rates. Each run is a fresh process (a new
mapping), alternating 4 KiB pages and transparent huge pages (MADV_HUGEPAGE).

    python3 bench/coldstart/first_touch.py --gib 2 --runs 5

On a VM whose balloon reports free pages to the host, the first write pays for the host backing
each page again; the second write shows the loop's own speed. See README.md, session 20."""
import argparse
import mmap
import subprocess
import sys
import time

PAGE_BYTES = 4096


def touch(m, size, value):
    started = time.perf_counter()
    for off in range(0, size, PAGE_BYTES):
        m[off] = value
    return size / (time.perf_counter() - started) / 1e9


def one_run(gib, huge):
    size = gib << 30
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    first = touch(m, size, 1)
    second = touch(m, size, 2)
    print(f"{'huge' if huge else '4k  '} first touch {first:.2f} GB/s, second {second:.2f} GB/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--one", choices=["4k", "huge"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one_run(args.gib, args.one == "huge")
        return
    for _ in range(args.runs):
        for kind in ("4k", "huge"):
            subprocess.run([sys.executable, __file__, "--gib", str(args.gib), "--one", kind],
                           check=True)


if __name__ == "__main__":
    main()
