"""Pictures of what the threads do, drawn from the simulator analyzer's records (matplotlib).

``simt-tiles analyze k06_transposed --config bm=32,bn=32,bk=8,tm=4,tn=8 --shape 32x32x8 --plot k06.png``
draws four panels from the first block that :mod:`simt_tiles.analyze` recorded:

* **shared memory, one warp-wide request**: the site with the most wavefronts per request;
  32 columns (the banks), one row per wavefront, each cell a word labelled with the lanes
  that read or write it — a conflict is a column taller than one row;
* **global memory, one request**: the load with the most 32-byte sectors per request, each
  sector a box of 8 words and the lanes' words inside it;
* **thread → element**: the output elements block 0 writes, coloured and labelled by lane;
* **what block 0 reads**: how many times block 0 loads each element of its first input — the
  halo of a convolution tile, the strips of A and B of a matmul tile.

The drawing needs no simulator: :func:`lesson_figure` takes a :class:`~simt_tiles.analyze.Report`
(its ``first_block`` records) and the analyzer's bank model, so this module does not import the
analyzer (which imports it for ``--plot``).  ``docs/generate.py`` draws one per lesson page.

:func:`fragment_figure` draws a tensor-core instruction's **fragment map** — which lane holds
each element of A, B and C, in which register — from :mod:`simt_tiles.mma`'s fragment helpers
(the layout its emulation computes with), not from a table typed here; the k13/k14 lesson pages
show it::

    fig = pictures.fragment_figure("tf32")   # m16n8k8: A 16×8, B 8×8, C 16×8
    fig = pictures.fragment_figure("bf16")   # m16n8k16: A 16×16, B 16×8, C 16×8 (two elements a register)
"""

from __future__ import annotations

import collections
import os

__all__ = ["requests", "bank_rows", "lesson_figure", "fragment_cells", "fragment_figure"]

SHARED, GLOBAL = "shared", "global"


def requests(report) -> tuple[dict, dict]:
    """Block 0's warp-wide requests, ``(space, (file, line), array, op) -> [[(lane, addr, size), ...], ...]``
    (one list per warp and occurrence, in recording order), and ``array -> shape``."""
    _block, records = report.first_block or (None, [])
    grouped: dict = collections.defaultdict(list)
    for space, site, occ, warp, lane, _interval, _ws, key, addr, size, is_write in records:
        grouped[(space, site, key, is_write, warp, occ)].append((lane, addr, size))
    out: dict = collections.defaultdict(list)
    shapes: dict = {}
    for (space, site, key, is_write, _w, _o), acc in grouped.items():
        name = report.names.get((site, key), "?")
        out[(space, site, name, "store" if is_write else "load")].append(acc)
        shapes[name] = getattr(report, "shapes", {}).get(key, ())
    return out, shapes


def bank_rows(accesses, banks: int, lanes_per_pass: dict) -> list[tuple[int, int, int, list[int]]]:
    """The bank model's layout of one shared request: ``(bank, row, word, lanes)`` per cell, the rows
    of each pass (half-warp for 8- and 16-byte accesses) stacked: rows = wavefronts."""
    passes: dict = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for lane, addr, size in accesses:
        for word in range(addr >> 2, ((addr + size - 1) >> 2) + 1):
            passes[lane // lanes_per_pass.get(size, 16)][word % banks][word].append(lane)
    cells, base = [], 0
    for p in sorted(passes):
        by_bank = passes[p]
        for bank, words in by_bank.items():
            for row, word in enumerate(sorted(words)):
                cells.append((bank, base + row, word, sorted(set(words[word]))))
        base += max(len(w) for w in by_bank.values())
    return cells


def _lanes_text(lanes: list[int]) -> str:
    if len(lanes) == 1:
        return str(lanes[0])
    if lanes == list(range(lanes[0], lanes[-1] + 1)):
        return f"{lanes[0]}-{lanes[-1]}"
    return f"{len(lanes)}×"


def _worst(reqs: dict, space: str, cost, op: str | None = None):
    """(key, request) of ``space`` with the highest ``cost(request)`` (ties: most lanes, first site)."""
    best = None
    for key, lists in sorted(reqs.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][3])):
        if key[0] != space or (op and key[3] != op):
            continue
        for acc in lists:
            score = (cost(acc), len(acc))
            if best is None or score > best[0]:
                best = (score, key, acc)
    return (best[1], best[2]) if best else (None, None)


def _where(key) -> str:
    return f"{os.path.basename(key[1][0])}:{key[1][1]}"


def _fold(elements: dict, shape: tuple):
    """(rows, width, first): flat element indices folded into rows of the array's last dimension
    (1-D arrays: rows of 32), from the row of the first element touched."""
    width = int(shape[-1]) if len(shape) >= 2 and shape[-1] else 32
    first = min(elements) - min(elements) % width
    return (max(elements) - first) // width + 1, width, first


def _panel_banks(ax, reqs, banks, lanes_per_pass, cmap):
    key, acc = _worst(reqs, SHARED, lambda a: max(r for _, r, _, _ in bank_rows(a, banks, lanes_per_pass)) + 1)
    if key is None:
        ax.set_axis_off()
        ax.set_title("shared memory: not used")
        return
    cells = bank_rows(acc, banks, lanes_per_pass)
    rows = max(r for _, r, _, _ in cells) + 1
    for bank, row, _word, lanes in cells:
        ax.add_patch(_rect(bank, row, cmap(lanes[0] / 31), ec="black"))
        ax.text(bank + 0.5, row + 0.5, _lanes_text(lanes), ha="center", va="center", fontsize=7)
    ax.set_xlim(0, banks)
    ax.set_ylim(max(rows, 1), 0)
    ax.set_xticks(range(0, banks + 1, 4))
    ax.set_yticks([r + 0.5 for r in range(rows)], [str(r + 1) for r in range(rows)])
    ax.set_xlabel("bank (4-byte word w sits in bank w % 32)")
    ax.set_ylabel("wavefront")
    verdict = "conflict-free" if rows == 1 else f"{rows}-way: {rows} wavefronts"
    ax.set_title(f"shared {key[3]} of {key[2]} at {_where(key)}: {verdict}\n(cells: the lanes of warp 0; "
                 "a taller column = a bank conflict)", fontsize=9)


def _panel_sectors(ax, reqs, sector, cmap):
    def n_sectors(a):
        return len({s for _, addr, size in a for s in range(addr // sector, (addr + size - 1) // sector + 1)})
    key, acc = _worst(reqs, GLOBAL, n_sectors, op="load")
    if key is None:
        ax.set_axis_off()
        ax.set_title("global loads: none")
        return
    used = sorted({s for _, addr, size in acc for s in range(addr // sector, (addr + size - 1) // sector + 1)})
    pos = {s: i for i, s in enumerate(used)}
    words = sector // 4
    for s in used:
        ax.add_patch(_rect(pos[s] * words, 0, "white", w=words, h=1, ec="black", lw=1.5))
    lanes_at: dict = collections.defaultdict(list)
    for lane, addr, size in acc:
        for word in range(addr >> 2, ((addr + size - 1) >> 2) + 1):
            lanes_at[word].append(lane)
    for word, lanes in lanes_at.items():
        x = pos[word * 4 // sector] * words + word % words
        ax.add_patch(_rect(x, 0.25, cmap(lanes[0] / 31), w=1, h=0.5))  # colour: the lane (as in the banks)
    asked = sum(size for _, size in {(a, s) for _, a, s in acc})
    ax.set_xlim(0, max(len(used) * words, 8))
    ax.set_ylim(1.2, -0.2)
    ax.set_yticks([])
    ax.set_xlabel("the sectors touched, side by side (8 words each; gaps not drawn); colour: the lane")
    ax.set_title(f"global load of {key[2]} at {_where(key)}: {len(used)} sectors of 32 B for {asked} B asked "
                 f"({100 * asked / (len(used) * sector):.0f}%)", fontsize=9)


def _element_map(reqs, op, pick):  # (name, {element: [lanes]})
    """``(array name, {flat element: [lanes]})`` of block 0's global ``op`` of the array ``pick`` chooses."""
    names = collections.Counter()
    for key, lists in reqs.items():
        if key[0] == GLOBAL and key[3] == op:
            names[key[2]] += sum(len(a) for a in lists)
    if not names:
        return None, {}
    name = pick(names)
    elements: dict = {}
    for key, lists in reqs.items():
        if key[0] == GLOBAL and key[3] == op and key[2] == name:
            for acc in lists:
                for lane, addr, size in acc:
                    elements.setdefault(addr // size, []).append(lane)
    return name, elements


def _panel_mapping(ax, reqs, shapes, cmap):
    name, elements = _element_map(reqs, "store", lambda c: c.most_common(1)[0][0])
    if not elements:
        ax.set_axis_off()
        ax.set_title("global stores: none")
        return (), {}
    import numpy as np

    rows, width, first = _fold(elements, shapes.get(name, ()))
    lane_of = np.full((rows, width), np.nan)
    for e, lanes in elements.items():
        lane_of[divmod(e - first, width)] = lanes[0]
    ax.imshow(lane_of, cmap=cmap, vmin=0, vmax=31, interpolation="nearest", extent=(0, width, rows, 0))
    if len(elements) <= 64 and width <= 16:  # cells big enough to read a number (text: most of the drawing time)
        for e, lanes in elements.items():
            r, c = divmod(e - first, width)
            ax.text(c + 0.5, r + 0.5, str(lanes[0]), ha="center", va="center", fontsize=7)
    ax.set_xlabel(f"column of {name} {tuple(shapes.get(name, ()))}")
    ax.set_title(f"thread → element: the {len(elements)} elements of {name} block 0 writes\n"
                 "(colour: the lane that writes it, 0 … 31; labelled when small)", fontsize=9)
    return shapes.get(name, ()), elements


def _panel_reads(ax, reqs, shapes, written):
    name, elements = _element_map(reqs, "load", lambda c: sorted(c)[0])
    if not elements:
        ax.set_axis_off()
        ax.set_title("global loads: none")
        return
    import numpy as np

    rows, width, first = _fold(elements, shapes.get(name, ()))
    counts = np.zeros((rows, width))
    for e, lanes in elements.items():
        r, c = divmod(e - first, width)
        counts[r, c] = len(lanes)
    im = ax.imshow(np.where(counts > 0, counts, np.nan), cmap="viridis", interpolation="nearest",
                   extent=(0, width, rows, 0))
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="loads by block 0")
    out_shape, out = written
    if out and tuple(out_shape) == tuple(shapes.get(name, ())):  # a filter: outline the output tile
        w = width
        r0, r1 = (min(out) - first) // w, (max(out) - first) // w
        c0, c1 = min(e % w for e in out), max(e % w for e in out)
        from matplotlib.patches import Rectangle

        ax.add_patch(Rectangle((c0, r0), c1 - c0 + 1, r1 - r0 + 1, fill=False, edgecolor="red", linewidth=2,
                               label="the output tile"))
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel(f"column of {name} {tuple(shapes.get(name, ()))}")
    ax.set_title(f"block 0 reads {name}: {len(elements)} elements, {int(counts.sum())} loads\n"
                 "(a filter's halo; a matmul's strip of A)", fontsize=9)


def _rect(x, y, color, w=1.0, h=1.0, ec=None, lw=0.5):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, facecolor=color, edgecolor=ec or color, linewidth=lw)


def lesson_figure(report, title: str, *, banks: int, sector: int, lanes_per_pass: dict):
    """The four panels (module docstring) for ``report`` — a Report recorded with ``first_block`` —
    as a matplotlib Figure (``savefig`` draws it with Agg; Jupyter displays it)."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no backend chosen (Jupyter keeps its own)

    reqs, shapes = requests(report)
    fig = Figure(figsize=(13, 8.5), dpi=100)  # a fixed layout: constrained layout doubles the drawing time
    axes = fig.subplots(2, 2, gridspec_kw={"left": 0.05, "right": 0.95, "top": 0.9, "bottom": 0.07,
                                           "hspace": 0.35, "wspace": 0.18})
    cmap = matplotlib.colormaps["turbo"]
    _panel_banks(axes[0, 0], reqs, banks, lanes_per_pass, cmap)
    _panel_sectors(axes[0, 1], reqs, sector, cmap)
    written = _panel_mapping(axes[1, 0], reqs, shapes, cmap)
    _panel_reads(axes[1, 1], reqs, shapes, written)
    fig.suptitle(title, fontsize=11)
    return fig


# ---------------------------------------------------------------------------
# tensor-core fragment maps
# ---------------------------------------------------------------------------

#: per precision: the mma shape and the (rows, columns) of A, B and C
MMA_SHAPES = {"tf32": ("m16n8k8", (16, 8), (8, 8)), "bf16": ("m16n8k16", (16, 16), (16, 8)),
              "fp16": ("m16n8k16", (16, 16), (16, 8))}


def fragment_cells(precision: str = "tf32") -> dict:
    """``{"A" | "B" | "C": {(row, column): (lane, register name)}}`` of one warp-wide mma of
    ``precision``, read off :func:`simt_tiles.mma.fragment_a` / ``fragment_b`` / ``fragment_c``
    applied to matrices of element indices (a 16-bit register holds two elements: both cells
    name it)."""
    import numpy as np

    from . import mma  # deferred: mma chooses its simulator or GPU half at import (the drawing needs neither)

    if precision not in MMA_SHAPES:
        raise ValueError(f"precision: expected one of {tuple(MMA_SHAPES)}; got {precision!r}")
    _, a_shape, b_shape = MMA_SHAPES[precision]
    frags = {"A": (a_shape, "a", mma.fragment_a(np.arange(a_shape[0] * a_shape[1]).reshape(a_shape), precision)),
             "B": (b_shape, "b", mma.fragment_b(np.arange(b_shape[0] * b_shape[1]).reshape(b_shape), precision)),
             "C": ((16, 8), "c", mma.fragment_c(np.arange(128).reshape(16, 8)))}
    cells: dict = {}
    for name, (shape, reg, frag) in frags.items():
        frag = np.asarray(frag).reshape(32, frag.shape[1], -1)  # (lane, register, element of the register)
        cells[name] = {divmod(int(frag[lane, r, h]), shape[1]): (lane, f"{reg}{r}")
                       for lane in range(32) for r in range(frag.shape[1]) for h in range(frag.shape[2])}
    return cells


def _panel_fragment(ax, name: str, shape: tuple, cells: dict, cmap):
    import numpy as np

    rows, cols = shape
    lane_of = np.full(shape, np.nan)
    for (i, j), (lane, _reg) in cells.items():
        lane_of[i, j] = lane
    ax.imshow(lane_of, cmap=cmap, vmin=0, vmax=31, interpolation="nearest", extent=(0, cols, rows, 0))
    ax.set_anchor("N")  # B (fewer rows) level with the tops of A and C
    for (i, j), (lane, reg) in cells.items():
        r, g, b, _ = cmap(lane / 31)
        ink = "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"
        ax.text(j + 0.5, i + 0.5, f"{lane}\n{reg}", ha="center", va="center", fontsize=7, color=ink,
                linespacing=0.9)
    for x in range(cols + 1):
        ax.axvline(x, color="white", linewidth=0.5)
    for y in range(rows + 1):
        ax.axhline(y, color="white", linewidth=0.5)
    regs = sorted({reg for _, reg in cells.values()})
    for (i, j) in cells:  # thick lines where the register changes: the fragment's blocks
        reg = cells[i, j][1]
        if j + 1 < cols and cells.get((i, j + 1), (0, reg))[1] != reg:
            ax.plot([j + 1, j + 1], [i, i + 1], color="black", linewidth=1.5)
        if i + 1 < rows and cells.get((i + 1, j), (0, reg))[1] != reg:
            ax.plot([j, j + 1], [i + 1, i + 1], color="black", linewidth=1.5)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)], fontsize=7)
    ax.set_yticks([r + 0.5 for r in range(rows)], [str(r) for r in range(rows)], fontsize=7)
    ax.set_xlabel("k" if name == "A" else "n")
    ax.set_ylabel("k" if name == "B" else "row")
    ax.set_title(f"{name} {rows}×{cols}: registers {', '.join(regs)}", fontsize=9)


def fragment_figure(precision: str = "tf32"):
    """The fragment map of one ``mma.sync`` of ``precision`` ("tf32": m16n8k8; "bf16"/"fp16":
    m16n8k16): three panels, A, B and C, each cell coloured by the lane that holds it and
    labelled with the lane and the register (:func:`fragment_cells`), as a matplotlib Figure."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no backend chosen (Jupyter keeps its own)

    cells = fragment_cells(precision)
    shape, a_shape, b_shape = MMA_SHAPES[precision]
    shapes = {"A": a_shape, "B": b_shape, "C": (16, 8)}
    cell = 0.42  # inches: the same cell size in every panel
    width, height = cell * (a_shape[1] + b_shape[1] + 8) + 3.0, cell * 16 + 1.9
    fig = Figure(figsize=(width, height), dpi=100)
    axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [a_shape[1], b_shape[1], 8], "left": 0.6 / width,
                                           "right": 1 - 0.2 / width, "top": 1 - 1.2 / height,
                                           "bottom": 0.6 / height, "wspace": 0.25})
    cmap = matplotlib.colormaps["turbo"]
    for ax, name in zip(axes, "ABC"):
        _panel_fragment(ax, name, shapes[name], cells[name], cmap)
    pairs = "" if precision == "tf32" else "; a 32-bit register holds two adjacent elements (k, k+1)"
    fig.suptitle(f"mma.sync.{shape} {precision.upper()}: which lane (number, colour) holds each element in which "
                 f"register; g = lane >> 2, t = lane & 3{pairs}\n(from simt_tiles.mma.fragment_a / fragment_b / "
                 "fragment_c, the layout the simulator's emulation multiplies with)", fontsize=10)
    return fig
