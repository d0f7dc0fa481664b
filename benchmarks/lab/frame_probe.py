"""Does compute-sanitizer keep the Python frames it walks for its allocation backtraces (issue 36: the
memcheck soak's arrays were still referenced at the end, their roots finished calls' frames)?

    [compute-sanitizer --tool memcheck --leak-check full [--show-backtrace no]] python3 benchmarks/lab/frame_probe.py THREADS N

THREADS threads each allocate and drop N small Numba device arrays (``cuda.to_device`` inside a
helper, so each allocation has a finished caller's frame) and N ``simt_tiles.vector_add`` results;
then every thread is joined, Numba's pending frees are flushed and a full collection runs. Prints the
Numba device arrays and frame objects still alive (a line ``alive: arrays A frames F``). Expected,
no tool: 0 and 0; if the tool keeps the frames: about 2 * THREADS * N arrays.
"""

import gc
import sys
import threading
from collections import Counter

import numpy as np
from numba import cuda

import simt_tiles as st


def helper(x):
    return cuda.to_device(x)


def work(n, x):
    for _ in range(n):
        d = helper(x)
        r = st.vector_add(d, d)
        del d, r


def main():
    threads, n = int(sys.argv[1]), int(sys.argv[2])
    x = np.ones(1000, np.float32)
    work(1, x)  # (the compile, before the threads)
    ts = [threading.Thread(target=work, args=(n, x)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ctx = cuda.current_context()
    ctx.memory_manager.deallocations.clear()  # (a GPU's context: the probe runs on a GPU only)
    ctx.deallocations.clear()
    gc.collect()
    arrays = sum(type(o).__name__ == "DeviceNDArray" for o in gc.get_objects())
    frames = Counter(f"{o.f_code.co_name}:{o.f_lineno}" for o in gc.get_objects() if type(o).__name__ == "frame")
    holders = Counter()
    for o in gc.get_objects():
        if type(o).__name__ == "frame" and o.f_code.co_name in ("helper", "work", "__init__"):
            holders.update(type(h).__name__ for h in gc.get_referrers(o))
            break
    print(f"alive: arrays {arrays} frames {sum(frames.values())}; {dict(frames.most_common(5))}; "
          f"a frame's referrers {dict(holders)}; refcount {sys.getrefcount(o) if holders else None}", flush=True)


if __name__ == "__main__":
    main()
