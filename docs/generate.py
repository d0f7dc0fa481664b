"""Generate the course's Markdown pages from the code and the committed results (no Sphinx needed).

    python docs/generate.py [OUTDIR]          # default: docs/generated/

``docs/conf.py`` calls :func:`generate` at every build, so nothing here is pasted:

* ``lessons/<ladder>/<rung>.md`` — one page per rung of every ladder, in ladder order
  (``simt_tiles.registry.ladders()``): the rung's header included from its source file,
  the headline and every committed measurement of the rung, the hazard it introduces
  (with the barriers and shared arrays counted in its source), the kernel code
  (``literalinclude`` of the real files), the diff to the rung it changes (difflib) and, where
  :mod:`simt_tiles.analyze` is installed, its bank-wavefront and sector numbers, measured in
  the simulator at build time (about 15 s for every rung); the tensor-core rungs' pages also show
  their mma's fragment map (``simt_tiles.pictures.fragment_figure``, about 1 s each);
* ``lessons/index.md`` — the ladders and their rungs;
* ``performance.md`` — the tables of ``benchmarks/results/*.json`` (``simt_tiles.report``);
* ``simt_vs_tile.md`` — each ladder's rungs beside their cuTile counterparts, with measurements.
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
RESULTS = ROOT / "benchmarks" / "results"


#: each ladder's cuTile counterpart (simt_tiles/tile/_kernels.py) and the results that measure both
TILE = {
    "matmul": ("matmul", "matmul_peers_h200.json", ("`ct.mma` on whole tiles: the compiler picks the thread "
               "layout, the shared-memory swizzle, the tensor-core instructions and the pipeline depth (what k03–k10 "
               "do by hand).")),
    "matmul_mma": ("matmul", "mma_h200.json", ("`ct.mma` with `precision=\"tf32\"` on whole tiles: the fragment "
                   "layouts, ldmatrix, swizzles and the cp.async (or TMA) pipeline that k13/k14 write by hand.")),
    "conv2d": ("correlate2d", "conv_h200.json", ("tile loads with padding for the boundary modes; the halo and "
               "staging of k02–k09 are the compiler's choice.")),
    "conv_nchw": (None, "conv_h200.json", "no cuTile counterpart in simt_tiles.tile (PyTorch/cuDNN is the peer)."),
    "softmax": ("softmax_tile / softmax_online", "patterns_h200.json", ("a row tile's `max` and `sum` are one "
                "call each: the tree / shuffle reductions of k01–k02 are generated.")),
    "reduce": ("sum_rows", "patterns_h200.json", ("`ct.sum` over a tile: the per-thread folding and the shuffle "
               "tree are generated.")),
    "elementwise": (None, "patterns_h200.json", ("elementwise tiles are the simplest tile programs; the simt ladder "
                    "is the reference.")),
}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def _ladders() -> dict:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # reading the rungs needs no GPU
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from simt_tiles import registry

    return registry.ladders()


def _hazards(ladder: str) -> dict:
    """The hazard each rung of ``ladder`` introduces (or removes) — one sentence a teacher can ask
    about: the family's registration (``FAMILY.hazards``)."""
    _ladders()  # the simulator chosen first
    from simt_tiles import registry

    return registry.ladder(ladder).family().hazards


def _docstring_span(src: str) -> tuple[int, int]:
    """1-based first and last line of the module docstring in ``src``."""
    lines = src.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(('"""', "'''")))
    quote = lines[start][:3]
    if lines[start].count(quote) >= 2 and len(lines[start].strip()) > 3:
        return start + 1, start + 1
    end = next(i for i in range(start + 1, len(lines)) if quote in lines[i])
    return start + 1, end + 1


def _private_bodies(module) -> list[Path]:
    """The private sibling modules (``_x.py``) a rung imports its kernel body or config from."""
    src = Path(inspect.getsourcefile(module)).read_text()
    here = Path(inspect.getsourcefile(module)).parent
    names = re.findall(r"^from \.(_\w+) import", src, flags=re.MULTILINE)
    return [here / f"{n}.py" for n in dict.fromkeys(names) if n != "_common" and (here / f"{n}.py").is_file()]


def _code(path: Path) -> str:
    """A source file without its module docstring (the lesson is in the code that changed)."""
    src = path.read_text()
    try:
        _, end = _docstring_span(src)
    except StopIteration:
        return src
    return "\n".join(src.splitlines()[end:]).lstrip("\n")


def _rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def _headline(doc: str) -> str | None:
    return next((ln.strip() for ln in doc.splitlines() if ln.strip().startswith("Headline")), None)


def _load(name: str) -> dict | None:
    path = RESULTS / name
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data if isinstance(data, dict) and "results" in data else None


def _rows_for(impl: str, files: list[str]) -> list[tuple[str, dict]]:
    out = []
    for name in files:
        data = _load(name)
        if not data:
            continue
        for r in data["results"]:
            if r.get("impl") == impl and r.get("dtype", "float32") == "float32" and r.get("kind") in (
                    None, "default", "simt", "rung"):
                out.append((name, r))
    return out


#: which results files measure each ladder (the rung rows are found by ``impl``)
LADDER_RESULTS = {
    "matmul": ["matmul_h200.json", "matmul_fast_h200.json"],
    "matmul_mma": ["mma_h200.json"],
    "conv2d": ["conv_h200.json", "conv_7x7_s6_h200.json"],
    "conv_nchw": ["conv_h200.json"],
    "softmax": ["patterns_h200.json", "softmax_k05_h200.json"],
    "reduce": ["patterns_h200.json"],
    "elementwise": ["patterns_h200.json", "bias_tiles_h200.json"],
}


def _problem(r: dict) -> str:
    if "problem" in r:
        return r["problem"]
    return f"{r['m']}×{r['n']}×{r['k']}"


def _measure_table(rows: list[tuple[str, dict]]) -> str:
    from simt_tiles._table import markdown

    body = []
    for name, r in rows:
        rate = (f"{r['tflops']:.2f} TFLOP/s" if "tflops" in r else
                f"{r['gbps']:.0f} GB/s" if "gbps" in r else "-")
        ratio = (f"{r['vs_cublas']:.3f}× cuBLAS" if "vs_cublas" in r else
                 f"{r['pct_ceiling']:.0f}% of copy" if "pct_ceiling" in r else
                 f"{r['vs_peer']:.2f}× peer" if "vs_peer" in r else "-")
        body.append([_problem(r), f"{r['median_ms']:.3f}" if "median_ms" in r else "-", rate, ratio,
                     "pass" if r.get("passed") else "FAIL", f"`{name}`"])
    return markdown(["problem", "median ms", "rate", "ratio", "check", "results file"], body)


def _facts(paths: list[Path]) -> list[str]:
    """Barriers, shared arrays and warp shuffles counted in the rung's source: where the hazards live."""
    out = []
    for p in paths:
        lines = p.read_text().splitlines()
        sync = [i + 1 for i, ln in enumerate(lines) if "syncthreads(" in ln and not ln.lstrip().startswith("#")]
        shared = [i + 1 for i, ln in enumerate(lines) if "cuda.shared.array(" in ln]
        shfl = [i + 1 for i, ln in enumerate(lines) if re.search(r"\bshfl_\w+|warp\.\w*(sum|max|shfl)", ln)]
        asyn = [i + 1 for i, ln in enumerate(lines) if "cp_async" in ln or "async_copy" in ln.replace("def ", "")]
        parts = []
        if sync:
            parts.append(f"{len(sync)} barrier call(s) (`syncthreads`, line {', '.join(map(str, sync))})")
        if shared:
            parts.append(f"{len(shared)} shared array(s) (line {', '.join(map(str, shared))})")
        if shfl:
            parts.append(f"warp-level exchange at line {', '.join(map(str, shfl))}")
        if asyn:
            parts.append(f"asynchronous copies at line {', '.join(map(str, asyn))}")
        out.append(f"`{_rel(p)}`: " + ("; ".join(parts) if parts else "no barrier, no shared array"))
    return out


# ---------------------------------------------------------------------------
# pages
# ---------------------------------------------------------------------------

def _lines(where: list[str]) -> str:
    """``k.py:3, k.py:4, k.py:5, k.py:9`` → ``k.py: 3–5, 9`` (one file name per group)."""
    by_file: dict = {}
    for w in where:
        f, n = w.rsplit(":", 1)
        by_file.setdefault(f, []).append(int(n))
    parts = []
    for f, ns in by_file.items():
        ns, runs = sorted(set(ns)), []
        for n in ns:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        label = f if len(f) <= 40 else "generated source"
        parts.append(f"{label}: " + ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs))
    return "; ".join(parts)


def _analyzer_rows(sites: list[dict]) -> list[list]:
    groups: dict = {}
    for s in sites:
        groups.setdefault((s["space"], s["array"], s["op"]), []).append(s)
    rows = []
    for (space, array, op), ss in groups.items():
        req = sum(s["requests"] for s in ss)
        per = sum(s["per_request"] * s["requests"] for s in ss) / req if req else 0.0
        rows.append([array, op, _lines([s["where"] for s in ss]), req,
                     f"{per:.2f}" if space == "shared" else "", f"{per:.2f}" if space != "shared" else ""])
    return rows


def _fence(directive: str, arg: str, options: dict, body: str = "") -> str:
    opts = "".join(f":{k}: {v}\n" if v != "" else f":{k}:\n" for k, v in options.items())
    return f"```{{{directive}}} {arg}\n{opts}{body}```\n"


def lesson_page(ladder: str, name: str, rung, order: list[str], rungs: dict, analyzed: dict,
                fragments: str | None = None) -> str:
    module = inspect.getmodule(rung.factory)
    path = Path(inspect.getsourcefile(module))
    src = path.read_text()
    first, last = _docstring_span(src)
    doc = module.__doc__ or ""
    title = doc.strip().splitlines()[0] if doc.strip() else name
    idx = order.index(name)

    # the rung it changes: the header's "versus kNN" if that rung is in the ladder, else its predecessor
    m = re.search(r"versus (k\d\d)", doc)
    prev = next((o for o in order if m and o.startswith(m[1])), None) if m else None
    if prev is None and idx > 0:
        prev = order[idx - 1]

    out = [f"({ladder}-{name})=", f"# {ladder} · {title}", ""]
    nav = []
    if idx > 0:
        nav.append(f"previous: [{order[idx - 1]}]({order[idx - 1]}.md)")
    if idx + 1 < len(order):
        nav.append(f"next: [{order[idx + 1]}]({order[idx + 1]}.md)")
    out += [f"Rung {idx + 1} of {len(order)} of the [{ladder} ladder](index.md). " + " · ".join(nav), ""]

    from simt_tiles.exercises import EXERCISES

    practise = [ex for ex in EXERCISES.values() if ex.lesson == f"{ladder}/{name}"]
    if practise:
        out += ["Practise it: " + ", ".join(f"the {{ref}}`{ex.name} <exercise-{ex.name}>` exercise ({ex.title})"
                                             for ex in practise), ""]
    out += ["## The lesson", "", f"The rung's header, from `{_rel(path)}`:", "",
            _fence("literalinclude", f"/../{_rel(path)}",
                   {"language": "text", "lines": f"{first}-{last}"})]
    if fragments:
        precision = FRAGMENT_PICTURES[ladder, name]
        out += ["## The fragment map", "",
                (f"Which lane of the warp holds each element of A, B and C for one `mma.sync` ({precision}), in which "
                 "register: drawn by `simt_tiles.pictures.fragment_figure` from `simt_tiles.mma`'s fragment "
                 "helpers, the layout the simulator's emulation multiplies with (the `mma_fragments` exercise "
                 "asks you to write the TF32 one)."), "",
                f"```{{image}} {fragments}", f":alt: {name}: the {precision} mma fragment map, lane and register "
                "of every element of A, B and C", "```", ""]

    out += ["## Measured on the H200", ""]
    head = _headline(doc)
    out += [f"Headline (checked against the results by `tests/test_headers.py`): **{head.split(': ', 1)[1]}**"
            if head and ": " in head else "No headline number for this rung.", ""]
    rows = _rows_for(name, LADDER_RESULTS.get(ladder, []))
    if rows:
        out += ["Every float32 measurement of this rung in the committed results:", "", _measure_table(rows), ""]

    bodies = _private_bodies(module)
    out += ["## The hazard it introduces", "", _hazards(ladder).get(name, "See the header."), "",
            "Counted in the source:", ""]
    out += [f"* {f}" for f in _facts([path, *bodies])] + [""]

    out += ["## Bank conflicts and sectors (simulator analyzer)", ""]
    if analyzed.get(ladder, {}).get(name):
        from simt_tiles._table import markdown
        sites = analyzed[ladder][name]
        out += [f"Measured by `simt_tiles.analyze` in the simulator ({sites['note']}), per array and "
                "access (the source lines it occurs on; the average over them):", "",
                markdown(["array", "op", "source lines", "warp-wide requests", "shared: wavefronts per request",
                          "global: 32-byte sectors per request"], _analyzer_rows(sites["sites"])),
                "", "1.00 wavefront is conflict-free; a warp reading 32 consecutive floats needs 4 sectors.", ""]
        if sites.get("picture"):
            out += ["Block 0 drawn from the same run by `simt_tiles.pictures` (`simt-tiles analyze … --plot`):", "",
                    f"```{{image}} {sites['picture']}", f":alt: {name}: shared banks, global sectors, thread to "
                    "element map and the elements block 0 reads", "```", ""]
    else:
        out += ["<!-- ANALYZER HOOK: filled by docs/generate.py analyze_all() when simt_tiles.analyze imports -->",
                ("*Not measured in this build:* where the simulator analyzer `simt_tiles.analyze` is installed, "
                "the build runs this rung under it and shows the bank wavefronts and global sectors per "
                "warp-wide request of every access site here."), ""]

    out += ["## The kernel", "", f"From `{_rel(path)}` (the header above omitted):", "",
            _fence("literalinclude", f"/../{_rel(path)}",
                   {"language": "python", "lines": f"{last + 1}-", "lineno-match": ""})]
    for b in bodies:
        out += [f"The shared body it builds on, `{_rel(b)}`:", "",
                _fence("literalinclude", f"/../{_rel(b)}", {"language": "python", "lineno-match": ""})]

    out += ["## What changed", ""]
    if prev is None:
        out += ["The first rung of the ladder: nothing to compare with.", ""]
    else:
        pmod = inspect.getmodule(rungs[prev].factory)
        ppath = Path(inspect.getsourcefile(pmod))
        old = [_code(ppath)] + [_code(b) for b in _private_bodies(pmod)]
        new = [_code(path)] + [_code(b) for b in bodies]
        diff = list(difflib.unified_diff("\n".join(old).splitlines(), "\n".join(new).splitlines(),
                                         fromfile=_rel(ppath), tofile=_rel(path), lineterm="", n=2))
        out += [(f"The code (headers omitted, shared bodies appended) against [{prev}]({prev}.md), "
                "generated with `difflib` at build time:"), ""]
        out += ["```diff", *(diff or ["(no difference in code: the lesson is in the configuration)"]), "```", ""]
    return "\n".join(out)


def lessons(outdir: Path, ladders: dict, analyzed: dict) -> list[str]:
    index = ["# Lessons: one page per rung", "",
             ("Every ladder of `simt_tiles.registry`, in ladder order. Each page shows the rung's header "
             "(its lesson), the measured effect on the H200, the hazard it introduces, the kernel "
             "included from its source file and the diff to the rung it changes."), ""]
    pages = []
    for ladder, rungs in ladders.items():
        order = list(rungs)
        d = outdir / "lessons" / ladder
        d.mkdir(parents=True, exist_ok=True)
        lad_index = [f"# The {ladder} ladder", "", "```{toctree}", ":maxdepth: 1", "", *order, "```", ""]
        for name, rung in rungs.items():
            fragments = _fragment_picture(FRAGMENT_PICTURES.get((ladder, name)), d / f"{name}_fragments.png")
            page = lesson_page(ladder, name, rung, order, rungs, analyzed, fragments)
            _write(d / f"{name}.md", page)
            pages.append(f"{ladder}/{name}")
            first = (inspect.getmodule(rung.factory).__doc__ or name).strip().splitlines()[0]
            lad_index.append(f"* [{name}]({name}.md) — {first.split('—', 1)[-1].strip()}")
        _write(d / "index.md", "\n".join(lad_index) + "\n")
        index.append(f"* [{ladder}]({ladder}/index.md): {len(order)} rungs")
    index += ["", "```{toctree}", ":hidden:", "", *(f"{lad}/index" for lad in ladders), "```", ""]
    _write(outdir / "lessons" / "index.md", "\n".join(index))
    return pages


def performance(outdir: Path) -> None:
    from simt_tiles.report import best_table, load, ratio_table

    out = ["# Performance", "",
           ("Generated at build time from `benchmarks/results/*.json` (the committed measurements; "
           "`benchmarks/notes/method.md` records how each was taken). Every entry was checked against its "
           "reference and error bound before it was timed."), ""]
    mm = RESULTS / "matmul_h200.json"
    if mm.is_file():
        data = load(mm)
        shown = dict(data, results=[r for r in data["results"] if not r.get("custom")])
        out += ["## matmul", "", (f"On {data['machine'].get('gpu', '?')}, float32, every rung at its default "
                f"config: TFLOP/s (× cuBLAS FP32) per size (`{_rel(mm)}`):"), "",
                ratio_table(shown), "", "```{image} /img/matmul_h200.png", ":alt: matmul TFLOP/s against size",
                "```", ""]
    for name, title, img in [("conv_h200.json", "Convolution", "conv_h200.png"),
                             ("patterns_h200.json", "Patterns: elementwise, reductions, softmax", "patterns_h200.png"),
                             ("bias_tiles_h200.json", "bias_relu tile shapes", "bias_tiles_h200.png"),
                             ("matmul_fast_h200.json", "matmul: the fast rungs (k11, k12) beside cuBLAS and Triton",
                              None),
                             ("matmul_peers_h200.json", "matmul against its peers (cuBLAS, cuTile)", None)]:
        p = RESULTS / name
        if not p.is_file():
            continue
        data = load(p)
        table = ratio_table(data) if "group" not in data["results"][0] else best_table(data)
        out += [f"## {title}", "", f"On {data['machine'].get('gpu', '?')} (`{_rel(p)}`):", "", table, ""]
        if any(r.get("impl") == "default" for r in data["results"]):
            out += ["`default` is the public call, `simt_tiles.matmul(a, b)`: the rung and split it chooses "
                    "for the size.", ""]
        if img and (DOCS / "img" / img).is_file():
            out += [f"```{{image}} /img/{img}", f":alt: {title}", "```", ""]
    _write(outdir / "performance.md", "\n".join(out))


def simt_vs_tile(outdir: Path, ladders: dict) -> None:
    from simt_tiles._table import markdown

    out = ["# SIMT vs Tile", "",
           ("simt_tiles writes every thread's work by hand; `simt_tiles.tile` writes the same operations in "
           "NVIDIA's tile model (cuTile Python), where a kernel says what one *block* does with whole tiles and "
           "the compiler (`tileiras`) chooses threads, shared-memory layout and swizzle, tensor-core "
           "instructions and the pipeline. Below, each ladder's rungs beside the cuTile counterpart, with the "
           "measurements of both where the committed results have them (same run, same checks)."), "",
           ("What the tile model costs: the CUDA 13.4 `tileiras` compiler and a driver r580 or later "
           "(`pip install 'simt-tiles[tile]'` pulls in only `cuda-tile`), tile sizes that are powers of two, "
           "float32 only in this project's counterparts, and fewer knobs: when the compiler's choice is slow "
           "there is no barrier, bank or register to move by hand."), ""]
    out += _tile_table()
    tile_rates: dict = {}
    for ladder, rungs in ladders.items():
        tile_fn, res, what = TILE[ladder]
        out += [f"## {ladder}", "",
                (f"cuTile counterpart: `{tile_fn}` in `simt_tiles/tile/_kernels.py`. " if tile_fn else "")
                + f"What the Tile compiler does for you: {what}", ""]
        data = _load(res)
        rows = [r for r in (data or {"results": []})["results"]
                if r.get("kind") == "tile" or str(r.get("impl", "")).startswith("cuTile")]
        if rows:
            problems = list(dict.fromkeys(_problem(r) for r in rows))
            allrows = [r for r in data["results"] if _problem(r) in problems and r.get("kind") != "ceiling"]
            body = []
            for r in allrows:
                rate = (f"{r['tflops']:.2f} TFLOP/s" if "tflops" in r else f"{r['gbps']:.0f} GB/s" if "gbps" in r
                        else "-")
                body.append([_problem(r), r["impl"], r.get("kind", ""), r.get("precision", ""), rate,
                             "pass" if r.get("passed") else "FAIL"])
                if "tflops" in r:
                    tile_rates[(ladder, r["impl"], _problem(r))] = r["tflops"]
            out += [f"Measured on the H200 (`{_rel(RESULTS / res)}`):", "",
                    markdown(["problem", "implementation", "kind", "precision", "rate", "check"], body), ""]
        else:
            out += [("The committed results hold no cuTile measurement for this ladder; its SIMT numbers are "
                    "on the [performance](performance.md) page."), ""]
        out += ["The SIMT rungs, one lesson each: "
                + ", ".join(f"[{n}](lessons/{ladder}/{n}.md)" for n in rungs), ""]
        for fn in (tile_fn or "").split(" / "):
            if fn:
                out += [f"The cuTile kernel `{fn}`, from `simt_tiles/tile/_kernels.py`:", "",
                        _fence("literalinclude", "/../simt_tiles/tile/_kernels.py",
                               {"language": "python", "pyobject": fn})]

    big = "4096×4096×4096"
    fp32, tf32 = tile_rates.get(("matmul", "cuTile FP32", big)), tile_rates.get(("matmul", "cuTile TF32", big))
    simt = max(((v, impl) for (lad, impl, p), v in tile_rates.items() if lad == "matmul" and p == big
                and not impl.startswith(("cuTile", "cuBLAS", "torch", "cupy"))), default=None)
    best = max(((r["tflops"], r["impl"], name) for name, r in
                sum((_rows_for(n, LADDER_RESULTS["matmul"]) for n in ladders["matmul"]), [])
                if _problem(r) == big and "tflops" in r), default=None)
    measured = ""
    if fp32 and tf32 and simt:
        measured = (f" Measured at 4096³ in one run: cuTile TF32 {tf32:.0f} TFLOP/s, cuTile with float32 operands "
                    f"{fp32:.1f}, the SIMT rung {simt[1]} {simt[0]:.1f} — the tile model's win is the tensor "
                    "cores; without them (FP32 `ct.mma`) the hand-tiled SIMT kernel is faster here.")
        if best and best[0] > simt[0]:
            measured += (f" The top SIMT rung now, {best[1]}, reached {best[0]:.1f} TFLOP/s in a later run "
                         f"(`{best[2]}`).")
    out += ["## Decision guide", "",
            ("* **Teaching how the GPU works** (coalescing, banks, barriers, occupancy): SIMT. Every one of those "
            "choices is a line you can read and change; the tile model hides them by design."),
            "* **A dense matmul or convolution where TF32 (or lower) precision is acceptable**: the tile model or "
            "a library (cuBLAS, cuDNN): tensor cores, swizzled layouts and asynchronous pipelines are out of "
            "reach of Numba SIMT kernels." + measured,
            ("* **FP32 arithmetic (no TF32 rounding)**: the SIMT top rungs or cuBLAS FP32; measure the tile kernel before "
            "assuming it is faster."),
            ("* **Memory-bound patterns** (elementwise, reductions, softmax, small stencils): the SIMT rungs reach "
            "most of the device-copy bandwidth ([performance](performance.md)); the table at the top of this "
            "page has every system on the same problems, so compare there before switching."),
            ("* **Unusual boundary semantics, float64, or fused epilogues** the tile counterparts do not offer: "
            "SIMT, with this project's references and bounds as the safety net."),
            ("* **No CUDA 13.4 `tileiras` or driver r580**: SIMT (Numba runs on older stacks, and in the "
            "simulator on a laptop)."), ""]
    _write(outdir / "simt_vs_tile.md", "\n".join(out))


def _tile_table() -> list[str]:
    """The one-run SIMT-vs-Tile table (``simt-tiles bench tile``), from the file the README reads too."""
    from simt_tiles.bench.tile_table import render

    data = _load("tile_table_h200.json")
    if not data:
        return []
    return ["## Every system, one run", "",
            (f"`simt-tiles bench tile` (`{_rel(RESULTS / 'tile_table_h200.json')}`): per problem the fastest SIMT "
             "rung and the default call beside cuTile Python, CUDA Tile C++, Triton, cuda.compute and the "
             "library, with the lines of kernel code of each."), "", render(data), ""]


def exercises_page(outdir: Path) -> None:
    from simt_tiles.exercises import EXERCISES

    out = ["# Exercises", "",
           ("Graded exercises a course can hand out. They run in Numba's CUDA simulator, so a laptop "
           "without a GPU is enough (a few seconds each):"), "",
           "```bash",
           "python -m simt_tiles.exercises list                # the exercises",
           "python -m simt_tiles.exercises start tiled_matmul  # copies the stub to ./tiled_matmul.py",
           "python -m simt_tiles.exercises check tiled_matmul  # grades ./tiled_matmul.py",
           "```", "",
           ("`check` runs your file on ragged shapes (1, tile ± 1, primes; empty where it applies) in float32 and float64 with "
           "outputs poisoned with NaN, compares with the project's references within their error bounds "
           "(exactly where the arithmetic is exact) and prints a verdict naming the case, the element, what "
           "was expected and what came. Then it compiles your kernels to sm_90 PTX with Numba's real "
           "compiler (no GPU needed): the simulator runs any Python, a GPU does not. Where the simulator "
           "analyzer `simt_tiles.analyze` is installed, "
           "every launch is race-checked: a missing barrier is reported as a race with its two source lines, "
           "and one more launch is recorded: its global sectors and shared-memory wavefronts are printed "
           "beside the reference solution's, with a score (1.00 = the reference), as GPU-Puzzles scores "
           "traffic; for the lessons that are about traffic (register blocking, the swizzle, vector loads, "
           "the one-pass softmax) more than the reference fails, naming the line."),
           "", "Reference solutions live in `exercises/solutions/` of the repository, outside the package.", ""]
    for ex in EXERCISES.values():
        lesson = ex.lesson.split("/")
        out += [f"(exercise-{ex.name})=", f"## {ex.name}: {ex.title}", "",
                (f"The lesson it practises: [{lesson[1]}](lessons/{ex.lesson}.md). The stub "
                f"(`{_rel(ex.stub)}`), statement and hints included:"), "",
                _fence("literalinclude", f"/../{_rel(ex.stub)}", {"language": "python"})]
    _write(outdir / "exercises.md", "\n".join(out))


def _write(path: Path, text: str) -> None:
    """Write only when changed, so Sphinx's incremental builds stay incremental."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def analyzer_available() -> bool:
    _ladders()  # the simulator chosen first
    try:
        from simt_tiles import analyze  # noqa: F401  (importable is the question)
    except ImportError:
        return False
    return True


def generate(outdir: Path | str = DOCS / "generated", analyze: bool | None = None) -> list[str]:
    """Write every generated page under ``outdir``; returns the lesson pages (ladder/rung).
    ``analyze``: run every rung under simt_tiles.analyze (None: when it is installed)."""
    outdir = Path(outdir)
    ladders = _ladders()
    if analyze is None:
        analyze = analyzer_available()
    pages = lessons(outdir, ladders, analyze_all(outdir / "lessons") if analyze else {})
    performance(outdir)
    simt_vs_tile(outdir, ladders)
    exercises_page(outdir)
    return pages


#: per rung, a config and shape that show its lesson in the analyzer (several warps per block, the
#: k06 conflict's BK = 8 geometry); other rungs run their "sim" preset on the analyzer's default shape
LESSON_RUNS = {
    ("matmul", "k01_naive"): ("block_x=32,block_y=2", "32x32x8"),
    ("matmul", "k02_coalesced"): ("block_x=32,block_y=2", "32x32x8"),
    ("matmul", "k03_smem_tiled"): ("tile=8", "16x16x16"),
    ("matmul", "k05_regblock_2d"): ("bm=32,bn=32,bk=8,tm=4,tn=8", "32x32x8"),
    ("matmul", "k06_transposed"): ("bm=32,bn=32,bk=8,tm=4,tn=8", "32x32x8"),
    ("matmul", "k07_padded"): ("bm=32,bn=32,bk=8,tm=4,tn=8,pad=4", "32x32x8"),
    ("matmul", "k08_swizzled"): ("bm=32,bn=32,bk=8,tm=4,tn=8", "32x32x8"),
    ("matmul", "k09_double_buffered"): ("bm=32,bn=32,bk=4,tm=4,tn=4", "32x32x9"),
    ("matmul", "k10_warptiled"): ("bm=32,bn=32,bk=4,wm=32,wn=16,tm=4,tn=4", "32x32x9"),
    ("conv2d", "k02_halo_tiled"): ("tile_w=8,tile_h=8", "10x9x3x3"),
    ("conv_nchw", "k02_smem_tiled"): ("tile_h=4,tile_w=8,co=8,rco=2,rp=2,ck=2", "1x5x4x8x8x3x3"),
    ("conv_nchw", "k03_double_buffered"): ("tile_h=4,tile_w=8,co=8,rco=2,rp=2,ck=2", "1x5x4x8x8x3x3"),
    ("conv_nchw", "k04_depthwise"): ("block_x=8,block_y=8,rw=2,min_blocks=1", "1x2x9x16x4x3x3"),
    ("elementwise", "bias_relu"): (None, "9x37"),
}


def analyze_all(pictures_dir: Path | None = None) -> dict:
    """simt_tiles.analyze's per-site numbers for every rung: {ladder: {rung: {"note", "sites", "picture"}}};
    with ``pictures_dir`` (and matplotlib), also ``pictures_dir/<ladder>/<rung>.png`` (simt_tiles.pictures)."""
    ladders = _ladders()
    from simt_tiles import analyze  # ImportError when the analyzer is not installed

    data: dict = {}
    for ladder, rungs in ladders.items():
        for name in rungs:
            config, shape = LESSON_RUNS.get((ladder, name), (None, None))
            try:
                rep = analyze.run(name, ladder=ladder, config=config, shape=shape, races=True)
            except Exception as exc:  # noqa: BLE001 — a rung the analyzer cannot drive: its page keeps the hook
                print(f"{ladder}/{name}: {exc}", file=sys.stderr)
                continue
            sites = [{"where": s.where, "space": s.space, "op": s.op, "array": s.array,
                      "requests": s.requests, "per_request": s.per_request} for s in rep.sites]
            shape = shape or analyze.DEFAULT_SHAPES.get(ladder, "?")
            data.setdefault(ladder, {})[name] = {
                "note": f"config {config or 'the sim preset'}, shape {shape}; "
                        + (f"{len(rep.races)} race(s)" if rep.races else "race check: no races"),
                "sites": sites, "picture": _picture(rep, f"{ladder} {name}, {rep.config}, shape {shape}",
                                                    pictures_dir / ladder / f"{name}.png" if pictures_dir else None)}
    return data


#: the tensor-core rungs' pages show their mma's fragment map (simt_tiles.pictures.fragment_figure)
FRAGMENT_PICTURES = {("matmul_mma", "k13_mma_tf32"): "tf32", ("matmul_mma", "k14_mma_bf16"): "bf16"}


def _fragment_picture(precision: str | None, path: Path) -> str | None:
    """Draw the fragment map of ``precision`` to ``path``; its file name, or None (no such page,
    no matplotlib, or ``SIMT_TILES_DOCS_PICTURES=0``; about 1-2 s a picture)."""
    if precision is None or os.environ.get("SIMT_TILES_DOCS_PICTURES", "1") == "0":
        return None
    try:
        from simt_tiles import pictures
        fig = pictures.fragment_figure(precision)
    except ImportError:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    return path.name


def _picture(report, title: str, path: Path | None) -> str | None:
    """Draw ``report``'s first block to ``path`` (simt_tiles.pictures); its file name, or None without
    matplotlib or with ``SIMT_TILES_DOCS_PICTURES=0`` (about 1-2 s of drawing per lesson page)."""
    if os.environ.get("SIMT_TILES_DOCS_PICTURES", "1") == "0":
        return None
    try:
        from simt_tiles import analyze, pictures
        fig = pictures.lesson_figure(report, title, banks=analyze.BANKS, sector=analyze.SECTOR,
                                     lanes_per_pass=analyze.LANES_PER_PASS)
    except ImportError:
        return None
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    return path.name


if __name__ == "__main__":
    print(len(generate(*sys.argv[1:2])), "lesson pages")
