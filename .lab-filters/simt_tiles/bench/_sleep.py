"""A kernel that holds the GPU: its one thread sleeps ``us`` microseconds in 1 µs naps
(``bench dispatch`` queues calls behind it to time them on the GPU alone)."""

from numba import cuda


@cuda.jit
def sleep(us):
    if cuda.threadIdx.x == 0:
        for _ in range(us):
            cuda.nanosleep(1000)
