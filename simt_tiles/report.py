"""Benchmark results → tables and plots (no GPU needed: it reads the committed JSON).

The benchmark scripts write JSON of the form ``{"machine": {...}, "results": [row, ...]}``
where a matmul row has ``impl``, ``config``, ``kind`` ("peer" / "default" /
"custom"), ``m``, ``n``, ``k``, ``passed`` and, when timed, ``median_ms``,
``tflops``, ``vs_cublas``.  This module turns that into

* :func:`ratio_table` — markdown: one row per implementation, one column per
  size, "TFLOP/s (× peer)";
* :func:`plot_rates` — a PNG: TFLOP/s against problem size, one line per
  implementation, the library peer dashed.

``python -m simt_tiles.report results.json --md out.md --plot out.png``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._table import markdown

__all__ = ["load", "ratio_table", "plot_rates", "main"]


def load(path) -> dict:
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError(f"{path}: expected a benchmark JSON with a 'results' list")
    return data


def _size(r) -> tuple[int, int, int]:
    return (r["m"], r["n"], r["k"])


def _label(r) -> str:
    return r["impl"] if r.get("kind") in ("peer", "default") else f"{r['impl']} [{r['config']}]"


def ratio_table(data: dict) -> str:
    """Markdown table: rows = implementations (in first-seen order), columns = sizes."""
    rows = data["results"]
    sizes = list(dict.fromkeys(_size(r) for r in rows))
    labels = list(dict.fromkeys(_label(r) for r in rows))
    head = ["implementation", *(f"{m}×{n}×{k}" for m, n, k in sizes)]
    body = []
    for label in labels:
        cells = []
        for s in sizes:
            r = next((r for r in rows if _label(r) == label and _size(r) == s), None)
            if r is None:
                cells.append("")
            elif not r.get("passed", False):
                cells.append("FAIL")
            elif "tflops" in r:
                ratio = r.get("vs_cublas")
                cells.append(f"{r['tflops']:.1f}" + (f" ({ratio:.2f}×)" if ratio else ""))
            else:
                cells.append("-")
        body.append([label, *cells])
    return markdown(head, body)


def plot_rates(data: dict, path, *, title: str | None = None, include_custom: bool = False) -> Path:
    """TFLOP/s against problem size (2·M·N·K on a log axis); the peer as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in data["results"] if "tflops" in r and (include_custom or r.get("kind") != "custom")]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for label in dict.fromkeys(_label(r) for r in rows):
        mine = sorted((r for r in rows if _label(r) == label), key=lambda r: r["m"] * r["n"] * r["k"])
        peer = mine[0].get("kind") == "peer"
        square = [r for r in mine if r["m"] == r["n"] == r["k"]]  # a line through the square sizes
        other = [r for r in mine if not r["m"] == r["n"] == r["k"]]  # the rest as markers
        (line,) = ax.plot([2 * r["m"] * r["n"] * r["k"] for r in square], [r["tflops"] for r in square],
                          "--" if peer else "-o", label=label, linewidth=2 if peer else 1.2, markersize=3,
                          color="black" if peer else None)
        ax.plot([2 * r["m"] * r["n"] * r["k"] for r in other], [r["tflops"] for r in other], "x",
                color=line.get_color(), markersize=5)
    ax.set_xscale("log")
    ax.set_xlabel("problem size, 2·M·N·K flops (lines: square sizes; ×: non-square)")
    ax.set_ylabel("TFLOP/s (float32)")
    gpu = data.get("machine", {}).get("gpu", "")
    ax.set_title(title or f"simt_tiles matmul ladder vs cuBLAS FP32 — {gpu}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m simt_tiles.report", description=__doc__.split("\n\n")[0])
    p.add_argument("json", help="a benchmark JSON (e.g. benchmarks/results/matmul_h200.json)")
    p.add_argument("--md", help="write the ratio table here (default: print it)")
    p.add_argument("--plot", help="write a PNG plot here")
    args = p.parse_args(argv)
    try:
        data = load(args.json)
    except (OSError, ValueError) as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    table = ratio_table(data)
    if args.md:
        Path(args.md).write_text(table + "\n")
    else:
        print(table)
    if args.plot:
        plot_rates(data, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
