"""Write the chapter notebooks (``python notebooks/make_notebooks.py``): one per chapter, code cells
without outputs.  Cells tagged ``install`` install simt_tiles where it is missing (Colab, a fresh
laptop); cells tagged ``gpu`` time the rungs and are skipped without a GPU (also by
``tests/test_notebooks.py``, which runs every other cell in the simulator)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

INSTALL = '''# Colab or a fresh laptop: install simt_tiles where it is missing (Python >= 3.11). Put the
# repository's address in REPO; "cu12" suits Colab's driver, "cu13" a driver r580 or newer.
import importlib.util, subprocess, sys
REPO = "<repository URL>"
if importlib.util.find_spec("simt_tiles") is None:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", f"simt-tiles[cu12,bench] @ git+{REPO}"])'''

BACKEND = '''# The GPU if there is one, else Numba's CUDA simulator (decided before numba.cuda is imported)
import os
if "numba.cuda" not in sys.modules and "NUMBA_ENABLE_CUDASIM" not in os.environ:
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numpy as np
import simt_tiles
from simt_tiles import registry
from simt_tiles.bounds import check_within
print("simulator" if simt_tiles.SIMULATOR else "GPU", "| simt_tiles", simt_tiles.__version__)'''

SIM_ONLY = ("the analyzer counts in Numba's CUDA simulator: restart the kernel with NUMBA_ENABLE_CUDASIM=1 "
            "set (before numba is imported) to see this cell")

PICTURE = '''from simt_tiles import analyze, pictures
def picture(variant, ladder, config, shape):
    """Block 0 of one rung, drawn from the analyzer's records (banks, sectors, thread → element, reads)."""
    if not simt_tiles.SIMULATOR:
        return print('SIM_ONLY_TEXT')
    rep = analyze.run(variant, ladder=ladder, config=config, shape=shape, races=False)
    return pictures.lesson_figure(rep, f"{ladder} {variant}, {rep.config}, shape {shape}",
                                  banks=analyze.BANKS, sector=analyze.SECTOR, lanes_per_pass=analyze.LANES_PER_PASS)'''.replace("'SIM_ONLY_TEXT'", repr(SIM_ONLY))

TIMER = '''from numba import cuda
from simt_tiles.timing import time_cuda, summarize
def median_ms(fn):
    return summarize(time_cuda(fn, warmup=2, reps=10))["median_ms"]'''


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text.strip("\n").splitlines(True)}


def code(text, *tags):
    return {"cell_type": "code", "metadata": {"tags": list(tags)} if tags else {}, "execution_count": None,
            "outputs": [], "source": text.strip("\n").splitlines(True)}


def sim(text):
    """A cell of analyzer counts: they exist in the simulator only, so on a GPU it says how to see them."""
    body = textwrap.indent(text.strip("\n"), "    ")
    return code(f"if simt_tiles.SIMULATOR:  # the analyzer records accesses in Numba's CUDA simulator\n{body}\n"
                f"else:\n    print({SIM_ONLY!r})")


def head(title, intro):
    return [md(f"# {title}\n\n{intro}\n\nRuns on a laptop or Colab without a GPU (Numba's CUDA simulator, "
               "small shapes); the last section times the rungs on a GPU and is skipped without one."),
            code(INSTALL, "install"), code(BACKEND)]


MATMUL = head("The matmul ladder: k01 → k12", "Each rung is one technique. Here: run every rung on a ragged "
              "shape and check it, see the memory lessons in the analyzer's numbers and pictures, then time "
              "the ladder beside cuBLAS.") + [
    md("## Every rung, checked\n\nThe `\"sim\"` presets are tiny tiles for the simulator; the shape is not a "
       "multiple of any tile."),
    code('''from simt_tiles.kernels.matmul.reference import matmul_reference
rng = np.random.default_rng(0)
a = rng.standard_normal((13, 7)).astype(np.float32)
b = rng.standard_normal((7, 11)).astype(np.float32)
ref, bound = matmul_reference(a, b)
for v in [v for v in simt_tiles.MATMUL_VARIANTS if v < "k11"]:
    chk = check_within(simt_tiles.matmul(a, b, variant=v, config="sim"), ref, bound)
    print(f"{v:<22} {chk}")
    assert chk, v'''),
    md("## The memory lessons, counted\n\nShared-memory wavefronts per warp-wide request (1 = conflict-free) "
       "of the A tile: k05 reads it down a column (at this config 8 lanes share a bank), k06 stores it "
       "transposed (8-way store conflicts, wide reads), k07 pads it, k08 swizzles it."),
    sim('''from simt_tiles import analyze
for v, cfg in [("k05_regblock_2d", "bm=32,bn=32,bk=8,tm=4,tn=8"), ("k06_transposed", "bm=32,bn=32,bk=8,tm=4,tn=8"),
              ("k07_padded", "bm=32,bn=32,bk=8,tm=4,tn=8,pad=4"), ("k08_swizzled", "bm=32,bn=32,bk=8,tm=4,tn=8")]:
    rep = analyze.run(v, config=cfg, shape="32x32x8", races=False)
    worst = max((s for s in rep.sites if s.space == "shared"), key=lambda s: s.per_request)
    print(f"{v:<18} worst shared access: {worst.array} {worst.op} at {worst.where}: {worst.per_request:.1f} wavefronts")'''),
    md("## What one warp does\n\nTop left: k06's transposed store — each column is a bank, each row a "
       "wavefront: 8 rows is an 8-way conflict. Bottom left: which lane writes which element of C."),
    code(PICTURE),
    code('''picture("k06_transposed", "matmul", "bm=32,bn=32,bk=8,tm=4,tn=8", "32x32x8")'''),
    md("## On a GPU: the ladder at 4096³ beside cuBLAS\n\nCUDA events, warm-up, median of 10; every rung at its "
       "`\"default\"` config (register blocking pays from k04 on: k03 → k04 → k05 ≈ 1.4× then 2×)."),
    code(TIMER + '''
n = 4096
da = cuda.to_device(np.random.default_rng(1).standard_normal((n, n)).astype(np.float32))
db = cuda.to_device(np.random.default_rng(2).standard_normal((n, n)).astype(np.float32))
dc = cuda.device_array((n, n), np.float32)
for v in simt_tiles.MATMUL_VARIANTS[2:]:
    ms = median_ms(lambda: simt_tiles.matmul(da, db, out=dc, variant=v, config="default"))
    print(f"{v:<22} {ms:8.3f} ms  {2 * n ** 3 / ms / 1e9:6.1f} TFLOP/s")
try:
    import cupy as cp
    ca, cb = cp.asarray(da), cp.asarray(db)
    ms = median_ms(lambda: ca @ cb)
    print(f"{'cuBLAS (CuPy)':<22} {ms:8.3f} ms  {2 * n ** 3 / ms / 1e9:6.1f} TFLOP/s")
except ImportError:
    print("CuPy not installed: no cuBLAS peer")''', "gpu"),
]

FILTERS = head("2-D filters: scipy.ndimage.correlate, rung by rung", "Halo tiles, register tiles, constant and "
               "separable filters, vector loads and prefetching, each checked against the long-double "
               "reference of `scipy.ndimage.correlate` in every boundary mode.") + [
    md("## Every rung, every boundary mode"),
    code('''from simt_tiles.kernels.conv2d.reference import CONV_MODES, correlate2d_reference
rng = np.random.default_rng(0)
image = rng.standard_normal((9, 13)).astype(np.float32)
w = rng.standard_normal((3, 3)).astype(np.float32)
for mode in CONV_MODES:
    ref, bound = correlate2d_reference(image, w, mode=mode)
    chk = check_within(simt_tiles.correlate2d(image, w, mode=mode), ref, bound)
    print(f"{mode:<9} default launcher: {chk}")
    assert chk, mode
ref, bound = correlate2d_reference(image, w, mode="reflect")
for v in ["k01_naive", "k02_halo_tiled", "k03_register_blocked"]:
    chk = check_within(simt_tiles.correlate2d(image, w, variant=v, config="sim"), ref, bound)
    print(f"{v:<22} {chk}")
    assert chk, v'''),
    md("## A separable filter: KH + KW taps per output instead of KH·KW"),
    code('''from simt_tiles.kernels.conv2d.reference import correlate_separable_reference
wy, wx = rng.standard_normal(5).astype(np.float32), rng.standard_normal(3).astype(np.float32)
ref, bound = correlate_separable_reference(image, wy, wx, mode="nearest")
chk = check_within(simt_tiles.correlate_separable(image, wy, wx, mode="nearest"), ref, bound)
print(chk)
assert chk'''),
    md("## The halo, drawn\n\nBottom right: how often block 0 loads each image element — the tile (red) and "
       "its halo; in mode \"mirror\" the edge rows are read twice."),
    code(PICTURE),
    code('''picture("k02_halo_tiled", "conv2d", "tile_w=8,tile_h=8", "20x19x3x3")'''),
    md("## On a GPU: every rung on a 4096² image, 5×5 filter"),
    code(TIMER + '''
img = cuda.to_device(np.random.default_rng(3).standard_normal((4096, 4096)).astype(np.float32))
w5 = np.random.default_rng(4).standard_normal((5, 5)).astype(np.float32)
out = cuda.device_array((4096, 4096), np.float32)
for v in simt_tiles.CONV2D_VARIANTS:
    try:
        ms = median_ms(lambda: simt_tiles.correlate2d(img, w5, out=out, variant=v, config="default"))
    except (ValueError, TypeError) as e:
        print(f"{v:<24} skipped: {e}")
        continue
    print(f"{v:<24} {ms:7.3f} ms  {3 * 4096 * 4096 * 4 / ms / 1e6:7.1f} GB/s")''', "gpu"),
]

NCHW = head("The NCHW convolution layer", "`torch.nn.functional.conv2d` semantics (stride 1, padding), as "
            "shared-memory tiles of input channels, then double buffering.") + [
    md("## Every rung, checked against the long-double reference"),
    code('''from simt_tiles.kernels.conv_nchw.reference import conv2d_nchw_reference
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 3, 7, 9)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
bias = rng.standard_normal(4).astype(np.float32)
ref, bound = conv2d_nchw_reference(x, w, bias, padding=1)
from simt_tiles.kernels.conv_nchw.dispatch import DEPTHWISE_VARIANT  # depthwise layers only
dense = [v for v in simt_tiles.CONV_NCHW_VARIANTS if v != DEPTHWISE_VARIANT]
for v in dense:
    chk = check_within(simt_tiles.conv2d_nchw(x, w, bias=bias, padding=1, variant=v, config="sim"), ref, bound)
    print(f"{v:<24} {chk}")
    assert chk, v
wd = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)  # depthwise: one filter per channel, groups = C_in
ref, bound = conv2d_nchw_reference(x, wd, None, padding=1, groups=3)
chk = check_within(simt_tiles.conv2d_nchw(x, wd, padding=1, groups=3, variant=DEPTHWISE_VARIANT, config="sim"),
                   ref, bound)
print(f"{DEPTHWISE_VARIANT:<24} {chk} (groups=3)")
assert chk'''),
    md("## Block 0's accesses"),
    code(PICTURE),
    code('''picture("k02_smem_tiled", "conv_nchw", "tile_h=4,tile_w=8,co=8,rco=2,rp=2,ck=2", "1x5x4x8x8x3x3")'''),
    md("## On a GPU: a ResNet-like layer, 32×64×56×56, 3×3, beside cuDNN (PyTorch)"),
    code(TIMER + '''
x = cuda.to_device(np.random.default_rng(1).standard_normal((32, 64, 56, 56)).astype(np.float32))
w = cuda.to_device(np.random.default_rng(2).standard_normal((64, 64, 3, 3)).astype(np.float32))
from simt_tiles.kernels.conv_nchw.dispatch import DEPTHWISE_VARIANT  # depthwise layers only
for v in [v for v in simt_tiles.CONV_NCHW_VARIANTS if v != DEPTHWISE_VARIANT]:
    print(f"{v:<24} {median_ms(lambda: simt_tiles.conv2d_nchw(x, w, padding=1, variant=v, config='default')):7.3f} ms")
try:
    import torch
    tx, tw = torch.as_tensor(x, device="cuda"), torch.as_tensor(w, device="cuda")
    torch.backends.cudnn.allow_tf32 = False
    print(f"{'cuDNN (torch)':<24} {median_ms(lambda: torch.nn.functional.conv2d(tx, tw, padding=1)):7.3f} ms")
except ImportError:
    print("PyTorch not installed: no cuDNN peer")''', "gpu"),
]

PATTERNS = head("Patterns: softmax, reductions, elementwise", "Warp shuffles, online softmax, a row in "
                "registers; grid-stride loops and 2-D tiles for elementwise work.") + [
    md("## Softmax: every rung, rows near ±1000 (exp overflows without the max subtracted)"),
    code('''from simt_tiles.kernels.softmax.reference import softmax_reference
rng = np.random.default_rng(0)
x = (rng.standard_normal((3, 45)) * 3).astype(np.float32)
x[0] += 1000
ref, bound = softmax_reference(x)
for v in simt_tiles.SOFTMAX_VARIANTS:
    chk = check_within(simt_tiles.softmax(x, variant=v, config="sim"), ref, bound)
    print(f"{v:<20} {chk}")
    assert chk, v'''),
    md("## Reductions and elementwise kernels"),
    code('''y = rng.standard_normal((5, 77)).astype(np.float32)
print("sum  ", np.allclose(simt_tiles.reduce(y, "sum", axis=1), y.sum(1), rtol=1e-5, atol=1e-5))
print("max  ", np.array_equal(simt_tiles.reduce(y, "max", axis=1), y.max(1)))
bias = rng.standard_normal(77).astype(np.float32)
print("bias_relu", np.array_equal(simt_tiles.bias_relu(y, bias), np.maximum(y + bias, 0)))
print("vector_add", np.array_equal(simt_tiles.vector_add(y[0], y[1]), y[0] + y[1]))'''),
    md("## One warp's accesses: softmax with a block per row"),
    code(PICTURE),
    code('''picture("k01_smem_tree", "softmax", None, "3x70")'''),
    md("## On a GPU: bandwidth of each pattern at 2²⁸ elements"),
    code(TIMER + '''
n = 1 << 28
v = cuda.to_device(np.ones(n, np.float32))
o = cuda.device_array(n, np.float32)
ms = median_ms(lambda: simt_tiles.vector_add(v, v, out=o))
print(f"vector_add   {ms:7.3f} ms  {3 * 4 * n / ms / 1e9:6.2f} TB/s")
ms = median_ms(lambda: simt_tiles.reduce(v))
print(f"reduce sum   {ms:7.3f} ms  {4 * n / ms / 1e9:6.2f} TB/s")
s = cuda.to_device(np.ones((1 << 16, 4096), np.float32))
so = cuda.device_array((1 << 16, 4096), np.float32)
ms = median_ms(lambda: simt_tiles.softmax(s, out=so))
print(f"softmax      {ms:7.3f} ms  {2 * 4 * s.size / ms / 1e9:6.2f} TB/s")''', "gpu"),
]

TILE = head("SIMT vs Tile: the same operations in cuTile", "simt_tiles writes every thread's work by hand; "
            "CUDA Tile (`cuda.tile`) describes what one block does with whole tiles and lets the compiler "
            "choose threads, shared memory and pipelining. Compare the code, then (on a GPU with cuTile) "
            "the speed.") + [
    md("## The code side by side: lines and what each side states"),
    code('''import inspect
from pathlib import Path
import simt_tiles.tile as tile
from simt_tiles.kernels.matmul import k10_warptiled
simt_src = inspect.getsource(k10_warptiled.make_kernel)
tile_src = Path(tile.__file__).with_name("_kernels.py").read_text()  # importing it needs cuda.tile
print("SIMT k10 kernel factory:", len(simt_src.splitlines()), "lines — threads, shared arrays, barriers, swizzle")
print("cuTile kernels module:  ", len(tile_src.splitlines()), "lines — tiles, ct.load/ct.mma/ct.store")
print("cuTile available here:", tile.available())'''),
    md("## What the SIMT side must get right (and the tile compiler does for you)\n\nThe analyzer's "
       "numbers for the top SIMT rung at a small config: the bank wavefronts and sectors of every access "
       "site, which the SIMT author tracks by hand (the 2-wavefront A store: the swizzle at BK = 4; the "
       "34.6% A loads: this shape's ragged K = 9)."),
    sim('''from simt_tiles import analyze
rep = analyze.run("k10_warptiled", config="bm=32,bn=32,bk=4,wm=32,wn=16,tm=4,tn=4", shape="32x32x9", races=True)
print(rep.format())'''),
    md("## On a GPU with cuTile: matmul at 4096³, both sides"),
    code(TIMER + '''
import simt_tiles.tile as tile
n = 4096
da = cuda.to_device(np.random.default_rng(1).standard_normal((n, n)).astype(np.float32))
db = cuda.to_device(np.random.default_rng(2).standard_normal((n, n)).astype(np.float32))
dc = cuda.device_array((n, n), np.float32)
ms = median_ms(lambda: simt_tiles.matmul(da, db, out=dc))
print(f"SIMT (simt_tiles.matmul)  {ms:7.3f} ms  {2 * n ** 3 / ms / 1e9:6.1f} TFLOP/s")
if tile.available():
    ms = median_ms(lambda: tile.matmul(da, db, out=dc))
    print(f"cuTile (fp32 ct.mma)      {ms:7.3f} ms  {2 * n ** 3 / ms / 1e9:6.1f} TFLOP/s")
else:
    print("cuda.tile is not installed (pip install 'simt-tiles[tile]'; needs CUDA 13.4 tileiras)")''', "gpu"),
]

NOTEBOOKS = {"01_matmul": MATMUL, "02_filters": FILTERS, "03_nchw": NCHW, "04_patterns": PATTERNS,
             "05_simt_vs_tile": TILE}


def notebook(cells) -> dict:
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def main() -> int:
    for name, cells in NOTEBOOKS.items():
        for i, cell in enumerate(cells):
            cell["id"] = f"{name}-{i:02d}"
        (HERE / f"{name}.ipynb").write_text(json.dumps(notebook(cells), indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
