"""16-bit softmax (bfloat16 and float16 logits, read 16-bit, float32 arithmetic, rounded once on store) beside
``torch.softmax`` on the same tensor and beside the float32 path on the same values: does halving the bytes halve
the time?  Not yet run (written without a GPU; benchmarks/notes/patterns.md, "16-bit softmax" has the prediction).

For each shape and dtype: the output is checked first (against torch's float64 softmax of the same 16-bit values,
within one 16-bit rounding plus the float32 bound's order, no NaN left in a NaN-filled ``out``), then timed as the
other probes time (``small_reduce_probe.timed``: three warm-up calls, an L2 flush before the start event, CUDA
events around one call, median of 40) and as a loop of queued calls (``loop_us``: wall µs a call, host included).
Rows: the default (``variant=None``), ``torch.softmax`` (its 16-bit kernel), ``torch.softmax(x.float()).to(dt)``
(what a float32-only library costs a 16-bit caller), the default on the float32 copy (the bytes ×2), and the
plan's rung named.  log_softmax at the Llama-3 shape.

``--vec [JSON]``: also k08 with its ``vec`` knob (2, 4 or 8 16-bit values a 4-, 8- or 16-byte load and
store; the default reads one a load) — the plan's k08 config (k08's default preset where the plan chose
another rung) with each JSON dict's fields replaced (default :data:`VEC_KNOBS`), at the shapes whose plan is
k08 (every shape with ``--vec-everywhere``), checked as the other rows, then timed; log_softmax too at the
Llama-3 shape.  ``--shapes 1024x128256,1024x128257`` runs those shapes only (an odd length: rows alternate
between an aligned start and a scalar head).

``--k05-vec [PRESETS]``: also k05 named with its 16-bit ``vec`` presets (default :data:`K05_VEC_PRESETS`: 8 values a
16-byte load, two and one blocks a SM) at every shape one of them holds, checked as the other rows, then timed
(log_softmax too at the first shape); the shapes :data:`K05_SHAPES` unless ``--shapes`` is given.

    python3 benchmarks/lab/softmax16_probe.py [--json PATH] [--quick] [--vec [JSON]] [--k05-vec [PRESETS]]
        [--shapes RxN,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (rows, columns, where from)
SHAPES = [
    (1024, 128256, "Llama-3 vocabulary, 1024 tokens (k08 split)"),
    (4096, 50257, "GPT-2 vocabulary (k05 one per SM)"),
    (4096, 32000, "Llama-2 vocabulary (k05 two per SM)"),
    (16384, 4096, "k04: rows in registers"),
    (65536, 256, "short rows (k04, a warp a row)"),
    (4, 1048576, "few very long rows (k08, pieces of one step)"),
]
QUICK = SHAPES[:2]
#: k08 knobs ``--vec`` times beside the default (fields replaced; registers a thread from nvJitLink, sm_90, both 16-bit
#: dtypes: 56 where a thread holds 16 values a step, as the default; 95-96 at 32)
VEC_KNOBS = [
    {"vec": 2, "loads": 8},  # the default's 16 values a step, half its loads (8 × 4 B in flight), pieces of 8192
    {"vec": 2},  # 16 × 4 B in flight: float32's bytes, 32 values a step, pieces of 16384
    {"vec": 2, "piece_steps": 1},  # … pieces of 8192 as the default's
    {"vec": 4, "loads": 4},  # 4 × 8 B
    {"vec": 8, "loads": 2},  # 2 × 16 B
    {"vec": 8, "loads": 4},  # 4 × 16 B: 32 values a step
    {"vec": 8, "loads": 4, "piece_steps": 1},
]
#: k05's 16-bit presets ``--k05-vec`` times beside the default, and the shapes it runs (rows k05 holds: the default
#: is k05 one a SM at the first and third, two a SM at the second)
K05_VEC_PRESETS = ["half", "half_one_per_sm"]
K05_SHAPES = [(4096, 50257, "GPT-2 vocabulary (k05 one per SM)"), (4096, 32000, "Llama-2 vocabulary (k05 two per SM)"),
              (2048, 65024, "a 65024 vocabulary (k05 one per SM)")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="the first two shapes only")
    ap.add_argument("--vec", nargs="?", const=json.dumps(VEC_KNOBS), metavar="JSON",
                    help="also k08 with these field dicts replaced (vec: 16-bit values a load; default VEC_KNOBS)")
    ap.add_argument("--vec-everywhere", action="store_true", help="--vec's rows at every shape, not only k08's")
    ap.add_argument("--shapes", help="rows x columns to run, e.g. 1024x128256,1024x128257 (default: SHAPES)")
    ap.add_argument("--k05-vec", nargs="?", const=",".join(K05_VEC_PRESETS), metavar="PRESETS",
                    help="also k05 with these 16-bit presets, comma-separated (default: K05_VEC_PRESETS), "
                         "at K05_SHAPES unless --shapes")
    args = ap.parse_args()
    import dataclasses

    import torch
    from small_reduce_probe import loop_us, timed

    import simt_tiles
    from simt_tiles.kernels.softmax import RUNGS, dispatch
    from simt_tiles.runtime import HALF_STORAGE

    k08 = RUNGS["k08_ticket_queue"]
    vec_knobs = json.loads(args.vec) if args.vec else []
    k05_presets = args.k05_vec.split(",") if args.k05_vec else []
    shapes = QUICK if args.quick else (K05_SHAPES if k05_presets else SHAPES)
    if args.shapes:
        shapes = [(int(r), int(c), "--shapes") for r, c in (sz.split("x") for sz in args.shapes.split(","))]

    flush = torch.empty(2**27, dtype=torch.float32, device="cuda")  # 512 MiB > L2
    rows_out = []
    u16 = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
    eta16 = {torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25}  # half the smallest subnormal (underflow)
    for rows, n, where in shapes:
        torch.manual_seed(rows + n)
        x32 = torch.randn(rows, n, device="cuda") * 4
        for dt in (torch.bfloat16, torch.float16):
            x = x32.to(dt)
            xf = x.float()  # the same values in float32
            ref = torch.softmax(x.double(), -1)
            out = torch.empty_like(x)
            name = str(dt).replace("torch.", "")
            plan = dispatch.plan((rows, n, 1), HALF_STORAGE[name])
            cases = [("default", lambda: simt_tiles.softmax(x, out=out)),
                     (f"{plan.rung.name} named", lambda: simt_tiles.softmax(x, out=out, variant=plan.rung.name,
                                                                           config=plan.config)),
                     ("torch.softmax", lambda: torch.softmax(x, -1)),
                     ("torch fp32 + cast", lambda: torch.softmax(xf, -1).to(dt)),
                     ("default on float32", lambda: simt_tiles.softmax(xf))]
            base = plan.config if plan.rung is k08 else k08.presets["default"]
            vec_cfgs = {}  # label → k08 config, timed beside the default
            if vec_knobs and (plan.rung is k08 or args.vec_everywhere):
                for knob in vec_knobs:
                    cfg = dataclasses.replace(base, **knob)
                    label = "k08 " + " ".join(f"{k}={v}" for k, v in knob.items())
                    vec_cfgs[label] = cfg
                    cases.append((label, lambda cfg=cfg: simt_tiles.softmax(x, out=out, variant="k08_ticket_queue",
                                                                            config=cfg)))
            for preset in k05_presets:  # k05 named with a 16-bit preset, where it holds the row
                try:
                    cfg = dispatch.plan((rows, n, 1), HALF_STORAGE[name], variant="k05_split_row", config=preset).config
                except simt_tiles.ConfigError:
                    print(f"{rows}x{n:<7} {name:<9} k05 {preset}: does not hold the row", flush=True)
                    continue
                label = f"k05 {preset}"
                vec_cfgs[label] = cfg
                cases.append((label, lambda preset=preset: simt_tiles.softmax(x, out=out, variant="k05_split_row",
                                                                          config=preset)))
            writes_out = ("default", f"{plan.rung.name} named", *vec_cfgs)
            for label, fn in cases:
                out.fill_(float("nan"))
                got = fn()
                got = out if label in writes_out else got
                torch.cuda.synchronize()
                err = (got.double() - ref).abs()
                # one 16-bit rounding of a float32 result (u16·|ref|; half a subnormal where it underflows: float16
                # probabilities under 2^-14, most of a vocabulary row's) and float32 terms well inside 2^-16 here
                tol = (u16[dt] if got.dtype == dt else 2.0 ** -24) * ref.abs() + 2.0 ** -16 * ref.abs() + (
                    eta16[dt] if got.dtype == dt else 1e-30)
                ok = not bool(torch.isnan(got).any()) and bool((err <= tol).all())
                ms = timed(fn, lambda: flush.zero_(), reps=40)
                wall = loop_us(fn)
                nbytes = 2 * rows * n * got.element_size()
                print(f"{rows}x{n:<7} {name:<9} {label:<34} {ms * 1e3:9.2f} us {nbytes / ms / 1e6:7.0f} GB/s "
                      f"loop {wall:8.1f} us {'ok' if ok else 'WRONG'}", flush=True)
                rows_out.append({"rows": rows, "n": n, "where": where, "dtype": name, "impl": label, "ms": ms,
                                 "GBps": nbytes / ms / 1e6, "loop_us": wall, "ok": ok, "rung": plan.rung.name,
                                 **({"config": dataclasses.asdict(vec_cfgs[label])} if label in vec_cfgs else {})})
            if (rows, n) == SHAPES[0][:2] or (k05_presets and (rows, n) == shapes[0][:2]):
                lref = torch.log_softmax(x.double(), -1)
                log_cases = [("log default", lambda: simt_tiles.log_softmax(x, out=out)),
                             ("log torch", lambda: torch.log_softmax(x, -1))]
                log_cases += [(f"log {label}", lambda cfg=cfg: simt_tiles.log_softmax(
                    x, out=out, variant="k05_split_row" if label.startswith("k05") else "k08_ticket_queue",
                    config=cfg)) for label, cfg in vec_cfgs.items()]
                for label, fn in log_cases:
                    out.fill_(float("nan"))
                    got = fn()
                    got = got if label == "log torch" else out
                    torch.cuda.synchronize()
                    ok = bool(((got.double() - lref).abs() <= u16[dt] * lref.abs() + 1e-3).all())
                    ms = timed(fn, lambda: flush.zero_(), reps=40)
                    print(f"{rows}x{n:<7} {name:<9} {label:<34} {ms * 1e3:9.2f} us {'ok' if ok else 'WRONG'}", flush=True)
                    rows_out.append({"rows": rows, "n": n, "dtype": name, "impl": label, "ms": ms, "ok": ok})
            del x, xf, ref, out
        del x32
    src = torch.empty(2**28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), lambda: flush.zero_(), reps=20)
    print(f"copy 2^28 float32 {ms * 1e3:.1f} us {2 * 2**30 / ms / 1e6:.0f} GB/s")
    rows_out.append({"impl": "copy 2^28", "ms": ms, "GBps": 2 * 2**30 / ms / 1e6})
    if args.json:
        command = " ".join(["python3 benchmarks/lab/softmax16_probe.py", *sys.argv[1:]])
        Path(args.json).write_text(json.dumps({"command": command,
                                               "device": torch.cuda.get_device_name(), "rows": rows_out}, indent=1))
    return 0 if all(r.get("ok", True) for r in rows_out) else 1


if __name__ == "__main__":
    sys.exit(main())
