"""Exercise vector_add — c = a + b for ANY length: n = 0, one element, a ragged last block.

Statement
    Complete ``add_kernel`` (one thread per element) and ``vector_add``, which launches it
    with ``threads`` threads per block on device arrays ``a``, ``b``, ``out`` of length n.
    The grader calls ``vector_add`` for n = 0, 1, threads − 1, threads, threads + 1 and a
    few more, with 32 and 64 threads per block, float32 and float64, and compares ``out``
    with ``a + b`` exactly (``out`` starts full of NaN).

Hints
    1. How many blocks cover n elements? Round up: ``(n + threads - 1) // threads``.
    2. The last block is ragged: its threads past n must not touch memory (``i < n``).
    3. n = 0 needs zero blocks, and a CUDA grid cannot have zero blocks: don't launch.

Check: ``python -m simt_tiles.exercises check vector_add vector_add.py``
"""

from numba import cuda


@cuda.jit
def add_kernel(a, b, out):
    i = cuda.grid(1)
    # TODO: guard the ragged last block, then write out[i] = a[i] + b[i]


def vector_add(a, b, out, threads):
    n = out.shape[0]
    blocks = 1  # TODO: enough blocks of `threads` threads to cover n (and n == 0?)
    add_kernel[blocks, threads](a, b, out)
