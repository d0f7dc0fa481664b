"""What compute-sanitizer's leak check reports for allocations a program did free (issue 36: the memcheck
soak's 16,165 leak reports at exit, although the soak frees what it holds).

    compute-sanitizer --tool memcheck --leak-check full python3 benchmarks/lab/leak_probe.py CASE N

CASE: numba (N `cuda.to_device` arrays dropped, Numba's pending frees flushed), numba_close (the same, then
`cuda.close()`), cupy (N CuPy arrays dropped, the pool's blocks freed), cupy_keep (dropped, the pool kept),
both_close (N of each, the pools freed, then `cuda.close()`, as the soak's --release does). A leak check that
counts only allocations still live reports 0 for every case but cupy_keep; reports near N (or 2N) mean
the frees are not seen (or happen after the context's end) — `gpu_pass.sh leak_probe` runs each case.
"""
import sys

import numpy as np

case, n = sys.argv[1], int(sys.argv[2])
if case.startswith(("numba", "both")):
    from numba import cuda

    for i in range(n):
        d = cuda.to_device(np.full(1000 + i, 1.0, np.float32))
        del d
    ctx = cuda.current_context()
    for queue in (getattr(ctx, "deallocations", None), getattr(getattr(ctx, "memory_manager", None), "deallocations", None)):
        if queue is not None:  # the context's queue (streams, events, modules), then the memory manager's (cuMemFree)
            queue.clear()
if case.startswith(("cupy", "both")):
    import cupy

    for i in range(n):
        x = cupy.full(1000 + 7 * i, 1.0, cupy.float32)  # distinct sizes: distinct pool blocks
        del x
    cupy.cuda.Device().synchronize()
    if case != "cupy_keep":
        cupy.get_default_memory_pool().free_all_blocks()
if case.endswith("close"):
    from numba import cuda

    cuda.close()
print(f"leak_probe {case} {n}: done")
