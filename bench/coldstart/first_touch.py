#!/usr/bin/env python3
"""How fast this machine hands out fresh memory: maps GIB of anonymous memory, writes one byte
per 4 KiB page, then does it again, and prints both rates. Each run is a fresh process (a new
mapping), alternating 4 KiB pages and transparent huge pages (MADV_HUGEPAGE).

    python3 bench/coldstart/first_touch.py --gib 2 --runs 5
    python3 bench/coldstart/first_touch.py --gib 1.28 --runs 5 --processes 2

With `--processes N`, N processes each fault in their share of the memory at the same moment (4
KiB pages only), as a load's threads do, and the rate is all of it over the slowest one's time.

On a VM whose balloon reports free pages to the host, the first write pays for the host backing
each page again; the second write shows the loop's own speed. See README.md, "What bounds the
load: fresh memory"."""
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
    size = int(gib * (1 << 30)) // PAGE_BYTES * PAGE_BYTES
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE)
    first = touch(m, size, 1)
    second = touch(m, size, 2)
    print(f"{'huge' if huge else '4k  '} first touch {first:.2f} GB/s, second {second:.2f} GB/s")


def share_at(gib, start_at):
    """Waits for the wall-clock time `start_at`, faults in `gib` of fresh 4 KiB pages and
    prints when it finished."""
    size = int(gib * (1 << 30)) // PAGE_BYTES * PAGE_BYTES
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    time.sleep(max(0.0, start_at - time.time()))
    touch(m, size, 1)
    print(time.time())


def together(gib, processes):
    start_at = time.time() + 1.0
    children = [subprocess.Popen([sys.executable, __file__, "--gib", str(gib / processes),
                                  "--share-at", str(start_at)], stdout=subprocess.PIPE, text=True)
                for _ in range(processes)]
    ends = [float(c.communicate()[0]) for c in children]
    seconds = max(ends) - start_at
    print(f"{processes} processes: {gib:.2f} GiB first touch in {seconds:.3f} s, "
          f"{gib * (1 << 30) / seconds / 1e9:.2f} GB/s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--one", choices=["4k", "huge"], help=argparse.SUPPRESS)
    ap.add_argument("--share-at", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.share_at is not None:
        share_at(args.gib, args.share_at)
        return
    if args.one:
        one_run(args.gib, args.one == "huge")
        return
    if args.processes > 1:
        for _ in range(args.runs):
            together(args.gib, args.processes)
        return
    for _ in range(args.runs):
        for kind in ("4k", "huge"):
            subprocess.run([sys.executable, __file__, "--gib", str(args.gib), "--one", kind],
                           check=True)


if __name__ == "__main__":
    main()
