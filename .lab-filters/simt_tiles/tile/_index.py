"""Index arithmetic the cuTile kernels share, as plain Python functions.

cuTile compiles a plain Python function called from a kernel as tile code, so
the kernels call these; because they use nothing but integer arithmetic and
``min``, the CPU tests also run them on Python ints (no cuda.tile, no GPU) and
check, for example, that the grouped block order visits every output tile
exactly once.
"""

from __future__ import annotations


def grouped_tile(pid, tiles_m, tiles_n, group_m):
    """Output tile (tm, tn) of block ``pid`` in a grid of tiles_m × tiles_n tiles.

    Blocks walk the tiles in groups of ``group_m`` tile-rows: down a column of
    the group first, then to the next column, then to the next group.  Blocks
    that run together (consecutive pids) then share a few rows of A and
    columns of B in L2 instead of sweeping all of B.  The last group may have
    fewer rows.
    """
    per_group = group_m * tiles_n
    group = pid // per_group
    first_m = group * group_m
    rows_here = min(tiles_m - first_m, group_m)
    within = pid % per_group
    return first_m + within % rows_here, within // rows_here


def block_of(pid, tiles_w):
    """(row tile, column tile) of block ``pid`` in a row-major 1-D grid."""
    return pid // tiles_w, pid % tiles_w
