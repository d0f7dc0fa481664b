"""Regenerate the README's ladder table from a committed benchmark JSON (never typed by hand).

    python benchmarks/render_readme.py [benchmarks/results/matmul_h200.json]

Also rewrites the ``patterns-table`` and ``conv-table`` blocks from
``benchmarks/results/{patterns,conv}_h200.json`` (best entry per problem beside
the peers) and redraws their plots.  Rewrites the block between ``<!-- ladder-table:begin -->`` and
``<!-- ladder-table:end -->`` in README.md: one row per rung (default
config) with TFLOP/s and the ratio to cuBLAS FP32 at 4096³, and the geometric
mean ratio over every size in the run; and redraws ``docs/img/matmul_h200.png``
(``simt_tiles.report.plot_rates``) from the same JSON.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DEFAULT = os.path.join(ROOT, "benchmarks", "results", "matmul_h200.json")
BEGIN, END = "<!-- ladder-table:begin -->", "<!-- ladder-table:end -->"


def ladder_rows(data: dict) -> tuple[list[str], list[list[str]]]:
    from simt_tiles._table import markdown  # noqa: F401  (same renderer as the benches)

    lessons = _lessons()
    res = [r for r in data["results"] if r["kind"] in ("default", "peer")]
    names = list(dict.fromkeys(r["impl"] for r in res))
    head = ["rung", "what it teaches", "TFLOP/s @4096³", "× cuBLAS @4096³", "geo-mean × cuBLAS (all sizes)"]
    rows = []
    for name in names:
        mine = [r for r in res if r["impl"] == name]
        at4k = next((r for r in mine if (r["m"], r["n"], r["k"]) == (4096, 4096, 4096)), None)
        ratios = [r["vs_cublas"] for r in mine if r.get("vs_cublas")]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        rows.append([
            f"`{name}`" if name in lessons else name,
            lessons.get(name, "library peer (FP32, TF32 off)"),
            f"{at4k['tflops']:.2f}" if at4k and "tflops" in at4k else "-",
            f"{at4k['vs_cublas']:.3f}" if at4k and "vs_cublas" in at4k else "-",
            f"{geo:.3f}" if geo else "-",
        ])
    return head, rows


def _lessons() -> dict[str, str]:
    import importlib

    from simt_tiles import _probe

    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # importing kernels needs no GPU
    _probe.select_backend()
    out = {}
    from simt_tiles.kernels.matmul import MATMUL_VARIANTS

    for v in MATMUL_VARIANTS:
        doc = importlib.import_module(f"simt_tiles.kernels.matmul.{v}").__doc__ or ""
        first = doc.strip().splitlines()[0]
        out[v] = first.split(":", 1)[-1].strip().rstrip(".") if ":" in first else first
    return out


def render(path: str = DEFAULT) -> str:
    from simt_tiles._table import markdown

    with open(path) as fh:
        data = json.load(fh)
    head, rows = ladder_rows(data)
    gpu = data["machine"].get("gpu", "?")
    rel = os.path.relpath(path, ROOT)
    note = (f"Measured on {gpu}, float32, by `benchmarks/bench_matmul.py` (results: `{rel}`); "
            "cuBLAS via CuPy in the same run.")
    plot = "![TFLOP/s of every rung and of cuBLAS FP32 against problem size](docs/img/matmul_h200.png)"
    return "\n".join([BEGIN, note, "", markdown(head, rows), "", plot, END])


#: the other benchmark groups: README block name → committed results (rendered when present)
GROUP_RESULTS = {"patterns": "patterns_h200.json", "bias_tiles": "bias_tiles_h200.json", "conv": "conv_h200.json",
                 "matmul_peers": "matmul_peers_h200.json"}


def render_groups(name: str, path: str) -> str:
    """The README block for a harness result file: the best-entry table and its plot."""
    from simt_tiles.report import best_table, load, plot_groups, ratio_table

    data = load(path)
    begin, end = f"<!-- {name}-table:begin -->", f"<!-- {name}-table:end -->"
    if "group" not in data["results"][0]:  # a matmul-bench file: TFLOP/s (× cuBLAS FP32) per size
        note = (f"Measured on {data['machine'].get('gpu', '?')} by `simt-tiles bench matmul` (results: "
                f"`{os.path.relpath(path, ROOT)}`); TF32 rows are checked against the TF32 bound.")
        return "\n".join([begin, note, "", ratio_table(data), end])
    img = os.path.join("docs", "img", f"{name}_h200.png")
    plot_groups(data, os.path.join(ROOT, img))
    copy = next((r for r in data["results"] if r.get("kind") == "ceiling"), None)
    note = (f"Measured on {data['machine'].get('gpu', '?')} by `simt-tiles bench {name}` (results: "
            f"`{os.path.relpath(path, ROOT)}`; every entry checked against its reference and bound before "
            "timing; GPU time, median of the timed runs; peers in the same run"
            + (f"; ceiling: device copy {copy['gbps']:.0f} GB/s" if copy else "") + ").")
    return "\n".join([begin, note, "", best_table(data), "", f"![{name} benchmark]({img})", end])


def main(argv=None) -> int:
    path = (argv or sys.argv[1:] or [DEFAULT])[0]
    readme = os.path.join(ROOT, "README.md")
    text = open(readme).read()
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: render(path), text, flags=re.S)
    for name, file in GROUP_RESULTS.items():
        result = os.path.join(ROOT, "benchmarks", "results", file)
        begin, end = f"<!-- {name}-table:begin -->", f"<!-- {name}-table:end -->"
        if os.path.exists(result) and begin in new:
            new = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: render_groups(name, result), new,
                         flags=re.S)
    if new == text:
        print("README.md: tables unchanged")
    open(readme, "w").write(new)
    from simt_tiles.report import load, plot_rates

    plot_rates(load(path), os.path.join(ROOT, "docs", "img", "matmul_h200.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
