"""The runner the Python driver suites share: runs the cases in order (or those named on the
command line), each on its own, and prints the `ok <case>` / `not ok <case>: <error>` lines
tests/drivers/run.py reads; `-v` adds each failure's traceback."""

import sys
import traceback


def run_cases(cases, run=lambda fn: fn()):
    only = {a for a in sys.argv[1:] if not a.startswith("-")}
    for fn in cases:
        if only and fn.__name__ not in only:
            continue
        try:
            run(fn)
            print(f"ok {fn.__name__}", flush=True)
        except BaseException as e:  # noqa: BLE001 - every failure is reported, then the next case runs
            if isinstance(e, KeyboardInterrupt):
                raise
            message = " ".join(str(e).split()) or type(e).__name__
            print(f"not ok {fn.__name__}: {type(e).__name__}: {message[:400]}", flush=True)
            if "-v" in sys.argv:
                traceback.print_exc()
