"""What the matmul probes of the lab share: kernels compiled in parallel first, an L2 flush, and the float64
reference with its γ_K·|A|·|B| bound (``matmul_narrow_rule_probe``, ``matmul_skinny_probe``,
``gemv_config_probe``)."""

from __future__ import annotations


def warm(jobs, processes: int = 16) -> None:
    """``jobs`` (``matmul_zoo.kernels``' tuples) compiled into Numba's disk cache, ``processes`` at once."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from simt_tiles.bench import matmul_zoo as zoo

    jobs = sorted(set(jobs), key=repr)
    print(f"warming {len(jobs)} kernels", flush=True)
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        for what, sec in pool.map(zoo._compile, jobs):
            print(f"  {sec:6.1f} s  {what}", flush=True)


def flusher():
    """TF32 off for torch's peer, and a callable that evicts L2 before each timed call: writes 512 MiB,
    then reads them, so the L2 ends clean (``bench``'s flush; flush_probe.py)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    buf = torch.empty(2**27, dtype=torch.float32, device="cuda")
    return lambda: (buf.zero_(), buf.sum())


def reference(a, b):
    """``(ref, bound)`` of the float32 product ``a @ b`` (torch tensors, any views): float64, and the
    elementwise γ_K·|A|·|B| bound of float32 plus the reference's own rounding."""
    import numpy as np

    from simt_tiles.bounds import gamma, unit_roundoff

    a64, b64 = a.double(), b.double()
    k = a.shape[-1]
    bound = (a64.abs() @ b64.abs()) * (gamma(k, unit_roundoff(np.float32)) + gamma(k, unit_roundoff(np.float64)))
    return a64 @ b64, bound


def within(out, ref, bound) -> bool:
    """Every element of ``out`` within ``bound`` of ``ref`` (NaN fails)."""
    return bool(((out.double() - ref).abs() <= bound).all())


def finish(json_path, script: str, rows) -> int:
    """Write ``rows`` (each with an ``ok``) to ``json_path`` (if given) with the command that made them; the exit
    code: 0 when every output was right."""
    import json
    from pathlib import Path

    if json_path:
        Path(json_path).write_text(json.dumps({"command": f"python3 benchmarks/lab/{Path(script).name}",
                                               "rows": rows}, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1
