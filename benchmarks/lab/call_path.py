"""Issue 29's call-path target, measured: which project files a repeated ``correlate2d(image, w)``
and ``matmul(a, b)`` (device arrays, plans off: the checked path) enter on the host, in order, from
the public function to the launch (``sys.setprofile``; the simulated kernels' own bodies left out).

    NUMBA_ENABLE_CUDASIM=1 python benchmarks/lab/call_path.py

Prints per function the distinct files, the number of file changes, and the sequence
(``file:function``); the target is ≤ 5 files for correlate2d, ≤ 4 for matmul, no return to a file left.
"""

import sys
from pathlib import Path

import numpy as np
from numba import cuda
from numba.cuda.simulator.kernel import FakeCUDAKernel

import simt_tiles as st
from simt_tiles import launch

ROOT = Path(st.__file__).resolve().parent


def host_files(call) -> list:
    """``[(file, function), ...]``: each entry a change of project file on the host path of ``call()``."""
    inside = [0]
    original = FakeCUDAKernel.__call__

    def kernel_call(self, *args):  # (a simulated kernel's body is the device's, not the call path)
        inside[0] += 1
        try:
            return original(self, *args)
        finally:
            inside[0] -= 1

    seen: list = []

    def profile(frame, event, arg):
        if event != "call" or inside[0]:
            return
        try:
            rel = Path(frame.f_code.co_filename).resolve().relative_to(ROOT).as_posix()
        except ValueError:
            return
        if not seen or seen[-1][0] != rel:
            seen.append((rel, frame.f_code.co_name))

    FakeCUDAKernel.__call__ = kernel_call
    try:
        call(), call()  # (compiles, caches)
        sys.setprofile(profile)
        try:
            call()
        finally:
            sys.setprofile(None)
    finally:
        FakeCUDAKernel.__call__ = original
    return seen


def main():
    if not st.runtime.SIMULATOR:
        raise SystemExit("call_path.py runs in the simulator (NUMBA_ENABLE_CUDASIM=1)")
    launch.set_enabled(False)
    rng = np.random.default_rng(29)
    image = cuda.to_device(rng.standard_normal((8, 9)).astype(np.float32))
    w = (np.arange(9, dtype=np.float32).reshape(3, 3) - 4) / 8
    a = cuda.to_device(rng.standard_normal((40, 24)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((24, 36)).astype(np.float32))
    for name, call in (("correlate2d", lambda: st.correlate2d(image, w)), ("matmul", lambda: st.matmul(a, b))):
        path = host_files(call)
        print(f"{name}: {len({f for f, _ in path})} files, {len(path)} file changes")
        print("  " + " -> ".join(f"{f}:{fn}" for f, fn in path))


if __name__ == "__main__":
    main()
