"""Benchmark results → tables and plots (no GPU needed: it reads the committed JSON).

Every benchmark and the demo write ``{"machine": {...}, "results": [row, ...]}`` with the rows
of ``simt_tiles.bench.harness`` (``group``, ``problem``, ``x``, ``impl``, ``kind``,
``precision``, ``passed``, ``err_over_bound``, ``median_ms``, ``gbps``/``tflops``,
``pct_ceiling``, ``vs_peer``, …).  Files written before that schema (matmul rows with
``m, n, k, config, vs_cublas`` and no ``group``) are converted when read (:func:`load`,
:func:`upgrade`); any other row (no ``group`` and no ``m, n, k`` or ``shape``, or not an object) is left
out with a warning.

* :func:`group_tables` — markdown, one table per group, the check result and precision
  beside every speed;
* :func:`best_table` — per problem, the fastest passing rung beside the peers;
* :func:`ratio_table` — matmul: one row per implementation, one column per size,
  "TFLOP/s (× peer)";
* :func:`plot` — a PNG: :func:`plot_rates` (TFLOP/s against 2·M·N·K) for a matmul
  run, else :func:`plot_groups` (one panel per group).

``python -m simt_tiles.report results.json --md out.md --plot out.png``
"""

from __future__ import annotations

import argparse
import json
import numbers
import sys
import warnings
from pathlib import Path

from ._options import output_file
from ._table import markdown

__all__ = ["best_table", "group_tables", "load", "main", "plot", "plot_groups", "plot_rates", "ratio_table",
           "upgrade"]


def load(path) -> dict:
    """A result file, its rows in the harness schema."""
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError(f"{path}: expected a benchmark JSON with a 'results' list")
    return upgrade(data)


def upgrade(data: dict) -> dict:
    """``data`` with every row in the harness schema (old matmul and demo rows converted; idempotent); a row
    that is neither is left out with a warning (another tool's file, a hand-edited row)."""
    rows = [_upgrade_row(r) for r in data["results"]]
    kept = [r for r in rows if r is not None]
    if len(kept) < len(rows):
        warnings.warn(f"{len(rows) - len(kept)} of {len(rows)} rows are not benchmark rows (expected objects with "
                      "'group', 'problem' and 'impl', or old matmul rows with 'm', 'n', 'k' or 'shape'); left out",
                      stacklevel=2)
    return {**data, "results": kept}


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _has_mnk(r: dict) -> bool:
    return all(_is_int(r.get(d)) for d in "mnk")


def _upgrade_row(r):
    if not isinstance(r, dict):
        return None
    if "group" in r:
        return r if isinstance(r.get("problem"), str) and isinstance(r.get("impl"), str) else None
    if not isinstance(r.get("impl"), str):
        return None
    r = dict(r)
    shape = r.get("shape")
    if "m" not in r and isinstance(shape, (list, tuple)) and len(shape) == 3:  # an old demo row: shape = [m, n, k]
        del r["shape"]
        r["m"], r["n"], r["k"] = shape
    if not _has_mnk(r):  # not an old matmul row either (dispatch's host times, another tool's rows)
        return None
    m, n, k = r["m"], r["n"], r["k"]
    old_kind = r.get("kind", "default")
    r["custom"] = old_kind == "custom"
    if r["custom"]:
        r["impl"] = f"{r['impl']} [{r.get('config', '')}]"
    r["kind"] = old_kind if old_kind in ("peer", "tile") else "simt"
    if r["impl"].startswith("cuBLAS") and old_kind not in ("peer", "tile"):  # old demo: the peer had no kind
        r["kind"] = "peer"
    r.update(group="matmul", problem=f"{m}x{n}x{k}", x=2 * m * n * k)
    r.setdefault("precision", "fp32")
    if "vs_cublas" in r:
        r["vs_peer"], r["peer"] = r.pop("vs_cublas"), "cuBLAS"
    return r


def _size(r) -> tuple[int, int, int]:
    return (r["m"], r["n"], r["k"])


def ratio_table(data: dict) -> str:
    """Markdown table of the matmul rows that name their sizes (``m, n, k``): rows = implementations
    (first-seen order), columns = sizes."""
    rows = [r for r in upgrade(data)["results"] if r["group"] == "matmul" and _has_mnk(r)]
    sizes = list(dict.fromkeys(_size(r) for r in rows))
    labels = list(dict.fromkeys(r["impl"] for r in rows))
    head = ["implementation", *(f"{m}×{n}×{k}" for m, n, k in sizes)]
    body = []
    for label in labels:
        cells = []
        for s in sizes:
            r = next((r for r in rows if r["impl"] == label and _size(r) == s), None)
            if r is None:
                cells.append("")
            elif not r.get("passed", False):
                cells.append("FAIL")
            elif "tflops" in r:
                ratio = r.get("vs_peer")
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

    rows = [r for r in upgrade(data)["results"]
            if r["group"] == "matmul" and _has_mnk(r) and "tflops" in r and (include_custom or not r.get("custom"))]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for label in dict.fromkeys(r["impl"] for r in rows):
        mine = sorted((r for r in rows if r["impl"] == label), key=lambda r: r["m"] * r["n"] * r["k"])
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


def _metric(rows) -> tuple[str, str]:
    return ("tflops", "TFLOP/s") if any("tflops" in r for r in rows) else ("gbps", "GB/s")


def group_tables(data: dict) -> str:
    """One markdown table per group of harness rows (see the module docstring)."""
    out = []
    rows = upgrade(data)["results"]
    for group in dict.fromkeys(r["group"] for r in rows):
        mine = [r for r in rows if r["group"] == group]
        key, unit = _metric(mine)
        head = ["problem", "implementation", "precision", "check (err/bound)", "median ms", unit,
                "% of ceiling", "× peer", "notes"]
        body = []
        for r in mine:
            check = "pass" if r.get("passed") else "FAIL"
            if r.get("err_over_bound") is not None:
                check += f" ({r['err_over_bound']:.2g})"
            notes = [f"{k}={r[k]:.3g}" for k in ("compile_s", "boundary_waste", "host_us") if k in r]
            if r.get("error"):
                notes.append(r["error"][:80].replace("|", "/"))
            body.append([r["problem"], r["impl"], r.get("precision", ""), check,
                         f"{r['median_ms']:.3f}" if "median_ms" in r else "-",
                         f"{r[key]:.1f}" if key in r else "-",
                         f"{r['pct_ceiling']:.1f}" if "pct_ceiling" in r else "-",
                         f"{r['vs_peer']:.2f}" if "vs_peer" in r else "-", ", ".join(notes)])
        out.append(f"### {group}\n\n" + markdown(head, body))
    return "\n\n".join(out)


def best_table(data: dict) -> str:
    """Markdown summary: per problem, the fastest passing SIMT entry beside every peer and cuTile entry."""
    rows = [r for r in upgrade(data)["results"] if r.get("kind") != "ceiling"]
    head = ["group", "problem", "fastest simt_tiles entry", "rate", "% of ceiling", "peers (same run)"]
    body = []
    for key in dict.fromkeys((r["group"], r["problem"]) for r in rows):
        mine = [r for r in rows if (r["group"], r["problem"]) == key]
        metric, unit = _metric(mine)
        simt = [r for r in mine if r.get("kind") == "simt" and r.get("passed") and metric in r]
        best = max(simt, key=lambda r: r[metric], default=None)
        peers = [f"{r['impl']}{' (tf32)' if r.get('precision') == 'tf32' else ''} "
                 + (f"{r[metric]:.0f}" if metric in r else "FAIL")
                 for r in mine if r.get("kind") in ("peer", "tile")]
        body.append([key[0], key[1], best["impl"] if best else "FAIL", f"{best[metric]:.0f} {unit}" if best else "-",
                     f"{best['pct_ceiling']:.0f}%" if best and "pct_ceiling" in best else "-", "; ".join(peers)])
    return markdown(head, body)


def plot_groups(data: dict, path, *, title: str | None = None) -> Path:
    """One panel per group (ceiling rows of group "copy" are drawn in every bandwidth panel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in upgrade(data)["results"] if r.get("passed") and ("gbps" in r or "tflops" in r)]
    ceilings = [r for r in rows if r.get("kind") == "ceiling"]
    groups = [g for g in dict.fromkeys(r["group"] for r in rows) if g not in {c["group"] for c in ceilings}]
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(5.2 * max(1, len(groups)), 4.4), dpi=110,
                             squeeze=False)
    for ax, group in zip(axes[0], groups):
        mine = [r for r in rows if r["group"] == group]
        key, unit = _metric(mine)
        impls = list(dict.fromkeys(r["impl"] for r in mine))
        problems = list(dict.fromkeys(r["problem"] for r in mine))
        xs = {r.get("x") for r in mine}
        if len(problems) > 2 and len(xs) == len(problems) and None not in xs:  # a size sweep: lines
            for impl in impls:
                pts = sorted((r["x"], r[key]) for r in mine if r["impl"] == impl)
                style = "--" if any(r["kind"] == "peer" for r in mine if r["impl"] == impl) else "-o"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=impl, markersize=3)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size (x)")
        else:  # bars: one cluster per problem
            width = 0.8 / max(1, len(impls))
            for i, impl in enumerate(impls):
                vals = [next((r[key] for r in mine if r["impl"] == impl and r["problem"] == p), 0) for p in problems]
                ax.bar([j + i * width for j in range(len(problems))], vals, width, label=impl)
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(problems))], problems, fontsize=7, rotation=15)
        for c in ceilings if key == "gbps" else []:
            ax.axhline(c["gbps"], color="black", linestyle="--", linewidth=1)
            ax.annotate(f"{c['impl']} {c['gbps']:.0f}", (0.01, c["gbps"]), xycoords=("axes fraction", "data"),
                        fontsize=7, va="bottom")
        ax.set_ylabel(unit)
        ax.set_title(group)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    gpu = data.get("machine", {}).get("gpu", "")
    fig.suptitle(title or f"{data.get('title', 'simt_tiles')} — {gpu}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot(data: dict, path) -> Path:
    """:func:`plot_rates` when every row is a matmul row with its sizes, else :func:`plot_groups`."""
    rows = upgrade(data)["results"]
    if rows and all(r["group"] == "matmul" and _has_mnk(r) for r in rows):
        return plot_rates(data, path)
    return plot_groups(data, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m simt_tiles.report", description=__doc__.split("\n\n")[0])
    p.add_argument("json", help="a benchmark JSON (e.g. benchmarks/results/matmul_h200.json)")
    p.add_argument("--md", type=output_file, help="write the tables here (default: print them)")
    p.add_argument("--plot", type=output_file, help="write a PNG plot here")
    args = p.parse_args(argv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = load(args.json)
    except (OSError, ValueError) as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 2
    for w in caught:
        print(f"report: {args.json}: {w.message}", file=sys.stderr)
    if not data["results"]:
        print(f"report: {args.json}: no benchmark rows to report", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the rows left out were named above)
        table = group_tables(data)
        if any(r["group"] == "matmul" and _has_mnk(r) for r in data["results"]):
            table += "\n\n### matmul: TFLOP/s (× baseline peer) by size\n\n" + ratio_table(data)
        try:
            if args.md:
                Path(args.md).write_text(table + "\n")
            else:
                print(table)
            if args.plot:
                plot(data, args.plot)
        except OSError as exc:
            print(f"report: cannot write {exc.filename or ''} ({exc.strerror or exc})", file=sys.stderr)
            return 2
        except ImportError as exc:
            print(f"report: --plot needs matplotlib ({exc})", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
