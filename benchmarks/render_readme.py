"""Regenerate every measured number in README.md from the committed results (never typed by hand).

    python benchmarks/render_readme.py [--results benchmarks/results] [--device h200]

Each block between ``<!-- NAME-table:begin -->`` and ``<!-- NAME-table:end -->`` is rewritten
from ONE results file, ``<group>_<device>.json`` (as ``simt-tiles bench GROUP --out DIR``
names them), and each (problem, implementation) pair appears in one block only:

    ladder        matmul_<device>.json        every rung at its default config and the baseline peer
                                              (TFLOP/s and × cuBLAS FP32 at 4096³, geometric mean),
                                              with the summary sentence, and docs/img/matmul_<device>.png
    matmul_peers  matmul_peers_<device>.json  the context peers (torch, TF32, cuTile) not in "ladder"
    matmul_fast   matmul_targets_<device>.json  the default ``simt_tiles.matmul``, the fast rungs (k11, k12) and
                  (else matmul_fast_<device>)   Triton's FP32 matmul on the size list, × cuBLAS FP32 of that run
    conv          conv_<device>.json          the fastest rung per problem beside its peers
    patterns      patterns_<device>.json      the same for softmax, reduce, elementwise
    bias_tiles    bias_tiles_<device>.json    every bias_relu tile shape
    tile_table    tile_table_<device>.json    the SIMT-vs-Tile table: every system per problem, with lines
                                              of kernel code (``simt-tiles bench tile``)
    matmul_zoo    matmul_zoo_<device>.json    the default beside cuBLAS FP32 and torch on the shape zoo (where each
                                              problem comes from, × cuBLAS, the geometric mean)
    dispatch      dispatch_<device>.json      host time per call of every public function (CuPy, PyTorch, Numba
                                              arrays) with launch plans, on the checked path, and the peers
                                              (rendered where README.md has the block)

README prose carries no measured numbers: it points at these blocks.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _block(name: str, body: list[str]) -> str:
    return "\n".join([f"<!-- {name}-table:begin -->", *body, f"<!-- {name}-table:end -->"])


def _measured_on(data: dict, path: str, command: str) -> str:
    m = data.get("machine", {})
    gpu = m.get("gpu", "?") + (f" (cc {m['compute_capability']})" if "compute_capability" in m else "")
    return f"Measured on {gpu} by `{command}`; results: `{os.path.relpath(path, ROOT)}`"


def _lessons() -> dict[str, str]:
    """Rung → the first line of its file's docstring (what it teaches)."""
    import importlib

    from simt_tiles import _probe

    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # importing kernels needs no GPU
    _probe.select_backend()
    from simt_tiles.kernels.matmul import MATMUL_VARIANTS

    out = {}
    for v in MATMUL_VARIANTS:
        doc = importlib.import_module(f"simt_tiles.kernels.matmul.{v}").__doc__ or ""
        first = doc.strip().splitlines()[0]
        out[v] = first.split(":", 1)[-1].strip().rstrip(".") if ":" in first else first
    return out


def ladder_block(path: str, img: str | None) -> tuple[str, set[str]]:
    """The matmul ladder table, the summary sentence and the plot; also the implementations shown."""
    from simt_tiles._table import markdown
    from simt_tiles.report import load, plot_rates

    data = load(path)
    lessons = _lessons()
    res = [r for r in data["results"] if r["group"] == "matmul" and not r.get("custom")]
    # rows of the run that are not rungs: what each one is
    _LADDER_PEERS = {"default": "`simt_tiles.matmul(a, b)`: its own choice of rung and tiles per size",
                     "Triton FP32": "library peer (`input_precision=\"ieee\"`, autotuned)"}
    names = list(dict.fromkeys(r["impl"] for r in res))
    head = ["rung", "what it teaches", "TFLOP/s @4096³", "× cuBLAS @4096³", "geo-mean × cuBLAS (all sizes)"]
    rows, ratio4k, geo = [], {}, {}
    for name in names:
        mine = [r for r in res if r["impl"] == name]
        at4k = next((r for r in mine if (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)), None)
        ratios = [r["vs_peer"] for r in mine if r.get("vs_peer")]
        geo[name] = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        ratio4k[name] = at4k.get("vs_peer") if at4k else None
        what = lessons.get(name) or _LADDER_PEERS.get(name, "library peer (FP32, TF32 off)")
        rows.append([f"`{name}`" if name in lessons else name, what,
                     f"{at4k['tflops']:.2f}" if at4k and "tflops" in at4k else "-",
                     f"{ratio4k[name]:.3f}" if ratio4k[name] else "-", f"{geo[name]:.3f}" if geo[name] else "-"])
    top = [n for n in names if n in lessons][-1]
    summary = (f"In this run the top rung, `{top}`, reaches **{ratio4k[top]:.2f}× cuBLAS FP32 at 4096³** and {geo[top]:.2f}× "
               "as a geometric mean over the sizes of the run.")
    if img:
        plot_rates(data, os.path.join(ROOT, img))
    img = img or f"docs/img/{os.path.basename(path).replace('.json', '.png')}"
    body = [_measured_on(data, path, "simt-tiles bench matmul") + "; float32, cuBLAS via CuPy in the same run.", "",
            markdown(head, rows), "", summary, "",
            f"![TFLOP/s of every rung and of cuBLAS FP32 against problem size]({img})"]
    return _block("ladder", body), set(names)


def peers_block(path: str, shown: set[str]) -> str:
    """The matmul peers of a separate run that the ladder table does not show."""
    from simt_tiles.report import load, ratio_table

    data = load(path)
    rows = [r for r in data["results"] if r["impl"] not in shown]
    body = [_measured_on(data, path, "simt-tiles bench matmul --sizes 4096 2048 --variants k10_warptiled")
            + "; TFLOP/s (× cuBLAS FP32 of that run). TF32 rows are checked against the TF32 bound.", "",
            ratio_table({**data, "results": rows})]
    return _block("matmul_peers", body)


#: the rows of the fast-matmul run the README shows (its split-K sweeps stay in the results file)
FAST_IMPLS = {"default": "`simt_tiles.matmul(a, b)` (default)", "k11_generated_split_k": "`k11_generated_split_k`",
              "k12_async_copy": "`k12_async_copy` (Aᵀ copy counted)", "Triton FP32": "Triton FP32 (`ieee`)",
              "cuBLAS": "cuBLAS FP32"}


#: the command that wrote each results file the matmul_fast block may come from
FAST_COMMANDS = {
    "matmul_fast": "simt-tiles bench matmul --sizes ... --variants k11_generated_split_k k12_async_copy",
    "matmul_targets": "simt-tiles bench matmul --default --variants k12_async_copy --sizes 1000 1024 "
                      "1031x997x1013 2048 4096 8192 4096x8192x1024 8192x1024x8192",
}


def fast_block(path: str) -> str:
    """The default matmul and the fast rungs on the size list beside cuBLAS and Triton (one run)."""
    from simt_tiles.report import load, ratio_table

    data = load(path)
    rows = [{**r, "impl": FAST_IMPLS[r["impl"]]} for r in data["results"] if r["impl"] in FAST_IMPLS]

    def geo(impl, over):
        ratios = []
        for r in rows:
            if r["impl"] == impl and r.get("passed"):
                base = next(b for b in rows if b["impl"] == over and b["problem"] == r["problem"])
                ratios.append(r["tflops"] / base["tflops"])
        return math.exp(sum(map(math.log, ratios)) / len(ratios))

    default = FAST_IMPLS["default"]
    tri = {r["problem"]: r["tflops"] for r in rows if r["impl"] == "Triton FP32 (`ieee`)" and r.get("passed")}
    behind = [r["problem"].replace("x", "×") for r in rows
              if r["impl"] == default and r.get("passed") and r["problem"] in tri and r["tflops"] < tri[r["problem"]]]
    summary = (f"Geometric mean over these sizes: the default is {geo(default, 'cuBLAS FP32'):.3f}× cuBLAS FP32 "
               f"and {geo(default, 'Triton FP32 (`ieee`)'):.3f}× Triton FP32. "
               + (f"Triton is ahead of the default at {', '.join(behind)} (`benchmarks/notes/matmul.md`)." if behind
                  else "The default is ahead of Triton at every size."))
    group = os.path.basename(path).rsplit("_", 1)[0]
    body = [_measured_on(data, path, FAST_COMMANDS[group]) + "; float32, TFLOP/s (× cuBLAS FP32 of that run); GPU time, cold L2.",
            "", ratio_table({**data, "results": rows}), "", summary]
    return _block("matmul_fast", body)


def groups_block(name: str, path: str, img: str, *, exclude=(), draw: bool = True) -> str:
    """The fastest entry per problem beside its peers, and the plot."""
    from simt_tiles.report import best_table, load, plot_groups

    data = load(path)
    data = {**data, "results": [r for r in data["results"] if r["group"] not in exclude]}
    if draw:
        plot_groups(data, os.path.join(ROOT, img))
    copy = next((r for r in data["results"] if r.get("kind") == "ceiling" and "gbps" in r), None)
    note = (_measured_on(data, path, f"simt-tiles bench {name}") + "; every entry checked against its reference "
            "and bound before timing; GPU time, median of the timed runs; peers in the same run"
            + (f"; ceiling: device copy {copy['gbps']:.0f} GB/s" if copy else "") + ".")
    return _block(name, [note, "", best_table(data), "",
                         f"![{name} benchmark]({img})"])


def bias_tiles_block(path: str) -> str:
    """Every bias_relu tile shape of the sweep (GB/s, % of the copy, compile time, boundary waste)."""
    from simt_tiles._table import markdown
    from simt_tiles.report import load

    data = load(path)
    rows = [r for r in data["results"] if r["group"] == "bias_tiles"]
    head = ["threads (x×y), rows per thread", "GB/s", "% of device copy", "compile s", "boundary waste"]
    body = [[r["impl"], f"{r['gbps']:.0f}" if "gbps" in r else "FAIL",
             f"{r['pct_ceiling']:.0f}%" if "pct_ceiling" in r else "-",
             f"{r['compile_s']:.2f}" if "compile_s" in r else "-",
             f"{r['boundary_waste']:.2g}" if "boundary_waste" in r else "-"] for r in rows]
    problem = rows[0]["problem"] if rows else "?"
    copy = next((r for r in data["results"] if r.get("kind") == "ceiling" and "gbps" in r), None)
    return _block("bias_tiles", [_measured_on(data, path, "simt-tiles bench bias_tiles")
                                 + f"; {problem} float32, every shape checked (exact) before timing"
                                 + (f"; device copy {copy['gbps']:.0f} GB/s in the same run." if copy else "."), "",
                                 markdown(head, body)])


def tile_table_block(path: str) -> str:
    """The SIMT-vs-Tile table of one ``simt-tiles bench tile`` run (``simt_tiles.bench.tile_table.render``)."""
    import json

    from simt_tiles.bench.tile_table import render

    with open(path) as fh:
        data = json.load(fh)
    return _block("tile_table", [_measured_on(data, path, "simt-tiles bench tile --reps 10 --out benchmarks/results") + ".", "",
                                 render(data)])


def dispatch_block(path: str) -> str:
    """Host µs per call of every public function, beside the checked path and CuPy/PyTorch calls."""
    import json

    from simt_tiles.bench.dispatch import markdown

    with open(path) as fh:
        data = json.load(fh)
    note = (_measured_on(data, path, "simt-tiles bench dispatch --out benchmarks/results")
            + f"; wall time of {data.get('calls', 300)} calls with `out=` given, before the one synchronisation,"
            " median of the loops; every result checked against the checked path (bit for bit) and NumPy first.")
    return _block("dispatch", [note, "", markdown(data)])


def zoo_block(path: str) -> str:
    """The matmul shape zoo: the default beside cuBLAS FP32 and torch per problem, with where each
    problem comes from, the geometric mean and the worst ratio."""
    import json

    with open(path) as fh:
        data = json.load(fh)
    by = {}
    for r in data["results"]:
        by.setdefault(r["problem"], {})[r["impl"]] = r
    lines = ["| problem | layout | from | default ms | cuBLAS ms | torch ms | × cuBLAS |", "|---|---|---|---|---|---|---|"]
    ratios, failed = [], 0

    def ms(row):  # (a failed or missing row has no time: a dash, not a KeyError)
        return f"{row['median_ms']:.3f}" if row and "median_ms" in row else "-"

    for problem, impls in by.items():
        d, c, t = impls["default"], impls.get("cuBLAS"), impls.get("torch.matmul")
        ok = bool(d.get("passed") and c and c.get("passed") and "median_ms" in d and "median_ms" in c)
        if ok:
            ratios.append(c["median_ms"] / d["median_ms"])
        else:
            failed += 1
        lines.append(f"| {problem.rsplit(' ', 2)[0]} {problem.rsplit(' ', 2)[1]} | {d['layout']} | {d['source']} | "
                     f"{ms(d)} | {ms(c)} | {ms(t)} | {f'{ratios[-1]:.2f}' if ok else '(check failed)'} |")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    summary = (f"Geometric mean over the {len(ratios)} problems"
               + (f" both checked ({failed} left out: a failed check)" if failed else "")
               + f": the default is {geo:.2f}× cuBLAS FP32; the worst is {min(ratios, default=float('nan')):.2f}×, "
               f"the best {max(ratios, default=float('nan')):.2f}× (where each comes from and what is next: "
               "`benchmarks/notes/matmul.md`, sessions 16 and 31).")
    note = (_measured_on(data, path, "simt-tiles bench matmul --zoo") + "; float32, GPU time (CUDA events, median "
            "of 10, inputs cycled over more than L2), every output checked against float64 first. The file merges "
            "the runs of one session (its `method` says which row comes from which, and the one row measured before the final rule).")
    return _block("matmul_zoo", [note, "", *lines, "", summary])


def render_all(text: str, results: str, device: str, *, plots: bool = True) -> str:
    """``text`` (the README) with every block regenerated; ``plots=False`` leaves the PNGs alone."""
    def path(group):
        return os.path.join(results, f"{group}_{device}.json")

    def put(text, name, block):
        begin, end = f"<!-- {name}-table:begin -->", f"<!-- {name}-table:end -->"
        if begin not in text:
            raise ValueError(f"README.md has no {begin} block")
        return re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)

    ladder, shown = ladder_block(path("matmul"), f"docs/img/matmul_{device}.png" if plots else None)
    text = put(text, "ladder", ladder)
    text = put(text, "matmul_peers", peers_block(path("matmul_peers"), shown))
    fast = path("matmul_targets") if os.path.exists(path("matmul_targets")) else path("matmul_fast")
    text = put(text, "matmul_fast", fast_block(fast))  # the newest same-run table of the sizes
    text = put(text, "conv", groups_block("conv", path("conv"), f"docs/img/conv_{device}.png", draw=plots))
    text = put(text, "patterns", groups_block("patterns", path("patterns"), f"docs/img/patterns_{device}.png",
                                              exclude=("bias_tiles",), draw=plots))
    text = put(text, "bias_tiles", bias_tiles_block(path("bias_tiles")))
    if "<!-- matmul_zoo-table:begin -->" in text and os.path.exists(path("matmul_zoo")):
        text = put(text, "matmul_zoo", zoo_block(path("matmul_zoo")))
    if "<!-- dispatch-table:begin -->" in text and os.path.exists(path("dispatch")):
        text = put(text, "dispatch", dispatch_block(path("dispatch")))
    return put(text, "tile_table", tile_table_block(path("tile_table")))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results"), help="the results folder")
    p.add_argument("--device", default="h200", help="the device slug in the file names (default: h200)")
    args = p.parse_args(argv)
    readme = os.path.join(ROOT, "README.md")
    with open(readme) as fh:
        text = fh.read()
    new = render_all(text, args.results, args.device)
    with open(readme, "w") as fh:
        fh.write(new)
    print("README.md: " + ("tables unchanged" if new == text else "tables rewritten"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
