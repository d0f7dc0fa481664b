"""The analyzer: bank-conflict and coalescing numbers of the lessons, and the race check.

Everything runs in the simulator at tiny shapes.  The lesson numbers are checked
against the committed Nsight Compute measurements, and each check is shown to
fail on a planted bug (padding removed, swizzle off, a barrier dropped, the
softmax partials reused), built by editing a copy of the module's source.
"""

from __future__ import annotations

import csv
import dataclasses
import pathlib

import numpy as np
import pytest
from numba import cuda, uint16  # module level: the simulator swaps this global inside kernels

from simt_tiles.runtime import SIMULATOR

pytestmark = pytest.mark.sim
if not SIMULATOR:
    pytest.skip("the analyzer runs in the CUDA simulator", allow_module_level=True)

from simt_tiles import analyze, registry
from simt_tiles.kernels.conv2d import k02_halo_tiled
from simt_tiles.kernels.conv_nchw import _tiled, k03_double_buffered
from simt_tiles.kernels.matmul import (
    _transposed,
    k03_smem_tiled,
    k07_padded,
    k08_swizzled,
    k09_double_buffered,
    k10_warptiled,
)
from simt_tiles.kernels.softmax import k04_register_row

NCU_CSV = pathlib.Path(__file__).parent.parent / "benchmarks/results/ncu_bank_conflicts_h200.csv"

# One warp of 32 threads storing an A tile of BM = 32 rows × BK = 8: the layout lesson of
# k06–k08 at the smallest size that has it (the GPU default, BM = 128 and 256 threads, has
# the same 4 rows × 8 k per warp store; test_lesson_at_the_gpu_default runs that one).
LESSON = "bm=32,bn=32,bk=8,tm=4,tn=8"
LESSON_SHAPE = "32x32x8"


def _a_store(report):
    return report.find("shared", "a_t", "store").per_request


def _edit(old: str, new: str):
    """A source edit replacing ``old`` by ``new`` (which must occur)."""
    def edit(lines):
        out = [line.replace(old, new) for line in lines]
        assert out != lines, f"{old!r} not in the source"
        return out
    return edit


def _drop_line(index: int):
    """A source edit turning line ``index`` (0-based) into ``pass``, keeping the numbering."""
    def edit(lines):
        line = lines[index]
        lines[index] = line[: len(line) - len(line.lstrip())] + "pass\n"
        return lines
    return edit


# ---------------------------------------------------------------------------
# The two models on hand-made requests
# ---------------------------------------------------------------------------


def test_wavefront_model():
    lanes = range(32)
    assert analyze.wavefronts([(i, 4 * i, 4) for i in lanes]) == 1  # 32 consecutive words
    assert analyze.wavefronts([(i, 0, 4) for i in lanes]) == 1  # one word: broadcast
    assert analyze.wavefronts([(i, 8 * i, 4) for i in lanes]) == 2  # stride 2: 2-way
    assert analyze.wavefronts([(i, 128 * i, 4) for i in lanes]) == 32  # one bank, 32 words
    assert analyze.wavefronts([(i, 128 * (i % 4), 4) for i in lanes]) == 4  # 4 words of bank 0
    assert analyze.wavefronts([(i, 8 * i, 8) for i in lanes]) == 2  # float64: per half-warp, 1 each
    assert analyze.wavefronts([(i, 16 * i, 8) for i in lanes]) == 4  # float64 stride 2: 2-way per half


def _ncu_by_id(metric):
    """{ncu ID: (kernel name, value of ``metric``)} from the committed Nsight Compute csv."""
    text = NCU_CSV.read_text().splitlines()
    rows = csv.DictReader(line for line in text if line.startswith('"'))
    return {int(r["ID"]): (r["Kernel Name"].split("::")[1].split("[")[0], int(r["Metric Value"].replace(",", "")))
            for r in rows if r["Metric Name"] == metric}


def _ncu(metric):
    """{kernel name: value} of the default configs (ID 7 is the extra k07 run with pad = 1)."""
    return {kernel: value for i, (kernel, value) in _ncu_by_id(metric).items() if i != 7}


def test_wide_loads_match_ncu():
    """128-bit shared loads, which the simulator cannot see (the GPU compiler makes them):
    their requests written out from the kernels' index formulas, costed by the model, give
    Nsight Compute's load wavefronts at 1024³ — per half-warp, not per quarter-warp."""
    ncu = _ncu("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
    lanes = range(32)
    # k03, T = 32 (SASS: per K step 32 LDS of b_tile[kk, tx] and 8 LDS.128 of a_tile[ty, kk:kk+4],
    # one ty per warp: a broadcast); 1024 blocks x 32 warps x 32 K steps
    b_row = analyze.wavefronts([(i, 4 * i, 4) for i in lanes])
    a_bcast = analyze.wavefronts([(i, 0, 16) for i in lanes])
    assert (b_row, a_bcast) == (1, 2)
    predicted = (32 * b_row + 8 * a_bcast) * 1024 * 32 * 32
    assert predicted <= ncu["matmul_k03_smem_tiled"] <= 1.001 * predicted
    # k06: per kk two LDS.128 of a_t (tr = lane // 16: two addresses) and two of b_s at
    # tc·TN (tc = lane % 16, TN = 8 words); 64 blocks x 8 warps x 128 K steps x 8 kk
    a = analyze.wavefronts([(i, 32 * (i // 16), 16) for i in lanes])
    b = analyze.wavefronts([(i, 32 * (i % 16), 16) for i in lanes])
    assert (a, b) == (2, 8)
    assert (2 * a + 2 * b) * 64 * 8 * 128 * 8 == ncu["matmul_k06_transposed"]


def test_k05_load_conflicts_match_ncu():
    """k05's shared loads are scalar on the GPU too (SASS: 16 LDS per kk, no LDS.128), so the
    simulator sees the GPU's requests: one block and K step of the default config, times
    64 blocks × 128 K steps, is Nsight Compute's count at 1024³ exactly — the 2-way
    conflict of its A reads (a_s[tr·TM + i, kk]: 2.0) and the 4-way of its B reads."""
    report = analyze.run("k05_regblock_2d", config="default", shape="128x128x8")
    assert report.find("shared", "a_s", "load").per_request == 2.0
    assert report.find("shared", "b_s", "load").per_request == 4.0
    scale = (1024 // 128) ** 2 * (1024 // 8)
    ncu = _ncu("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
    assert report.totals()["shared load"]["cost"] * scale == ncu["matmul_k05_regblock_2d"]


def test_sector_model():
    lanes = range(32)
    assert analyze.sectors([(i, 4 * i, 4) for i in lanes]) == 4
    assert analyze.sectors([(i, 4 * i + 4, 4) for i in lanes]) == 5  # misaligned by one float
    assert analyze.sectors([(i, 8 * i, 8) for i in lanes]) == 8
    assert analyze.sectors([(i, 0, 4) for i in lanes]) == 1
    assert analyze.sectors([(i, 36 * i, 4) for i in lanes]) == 32


# ---------------------------------------------------------------------------
# Bank conflicts: k06 (8-way), k07 pad 4 (none), pad 1 (4-way), k08 (none)
# ---------------------------------------------------------------------------

LESSONS = [  # rung, config, A-store wavefronts per request (the rung's docstring number)
    ("k06_transposed", LESSON, 8.0),
    ("k07_padded", LESSON + ",pad=4", 1.0),
    ("k07_padded", LESSON + ",pad=1", 4.0),
    ("k08_swizzled", LESSON, 1.0),
]


@pytest.mark.parametrize("variant, config, expected", LESSONS, ids=[f"{v}-{c[-5:]}" for v, c, _ in LESSONS])
def test_bank_conflict_lessons(variant, config, expected):
    report = analyze.run(variant, config=config, shape=LESSON_SHAPE)
    assert _a_store(report) == expected
    assert report.find("shared", "b_s", "store").per_request == 1.0
    assert report.races == []


def test_lesson_at_the_gpu_default_matches_ncu():
    """Nsight Compute's shared store wavefronts at 1024³ with the default config, predicted:
    the store requests of one block and K step of the default (BM = BN = 128, BK = 8,
    256 threads), times 64 blocks × 128 K steps, times the wavefronts per request (k06 from
    the default itself; the others from the one-warp lesson config, same store pattern)."""
    ncu = _ncu_by_id("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
    default = analyze.run("k06_transposed", config="default", shape="128x128x8")  # 1.5 s
    a, b = default.find("shared", "a_t", "store"), default.find("shared", "b_s", "store")
    assert (a.per_request, b.per_request) == (8.0, 1.0)
    scale = (1024 // 128) ** 2 * (1024 // 8)
    cases = [  # ncu ID (the csv's second k07 run is pad = 1), rung, config fields, per A store
        (2, "k06_transposed", "", a.per_request),
        (3, "k07_padded", ",pad=4", None),
        (7, "k07_padded", ",pad=1", None),
        (4, "k08_swizzled", "", None),
    ]
    for ncu_id, variant, fields, per_a in cases:
        kernel, measured = ncu[ncu_id]
        assert kernel == f"matmul_{variant}"
        if per_a is None:
            per_a = _a_store(analyze.run(variant, config=LESSON + fields, shape=LESSON_SHAPE))
        predicted = scale * (a.requests * per_a + b.requests * b.per_request)
        # ncu counts a little more (0.4–1.5% here), never less
        assert predicted <= measured <= 1.02 * predicted, (variant, fields, predicted, measured)


def test_removing_k07_padding_fails_the_lesson():
    mutant = analyze.mutant_module(k07_padded, _edit("width = config.bm + config.pad", "width = config.bm"))
    report = analyze.run("k07_padded", config=LESSON + ",pad=4", shape=LESSON_SHAPE,
                         rung=analyze.mutant_rung(k07_padded.RUNG, mutant))
    assert _a_store(report) == 8.0  # the k06 conflict is back: the lesson test's 1.0 fails


def test_breaking_the_swizzle_fails_the_lesson():
    mutant = analyze.mutant_module(_transposed, _edit("col = r ^ ((q & SEVEN) << TWO) if SWIZZLE else r",
                                                      "col = r ^ ((q & SEVEN) << TWO) if False else r"))
    report = analyze.run("k08_swizzled", config=LESSON, shape=LESSON_SHAPE,
                         rung=analyze.mutant_rung(k08_swizzled.RUNG, mutant))
    assert _a_store(report) == 8.0  # (the reads stay swizzled: the results are wrong too)


# ---------------------------------------------------------------------------
# Coalescing: k01 vs k02, naive vs tiled
# ---------------------------------------------------------------------------


def test_coalescing_k01_vs_k02():
    """A warp of 32 threads along x: k01 maps x to rows (A and C strided: one sector per lane),
    k02 to columns (B and C: 32 consecutive floats, 4 sectors; A: a broadcast)."""
    cfg, shape = "block_x=32,block_y=2", "32x32x8"
    k01 = analyze.run("k01_naive", config=cfg, shape=shape)
    k02 = analyze.run("k02_coalesced", config=cfg, shape=shape)
    assert k01.find("global", "a", "load").per_request == 32.0
    assert k01.find("global", "b", "load").per_request == 1.0
    assert k01.find("global", "c", "store").per_request == 32.0
    assert k01.find("global", "c", "store").efficiency == 0.125
    assert k02.find("global", "a", "load").per_request == 1.0
    assert k02.find("global", "b", "load").per_request == 4.0
    assert k02.find("global", "c", "store").per_request == 4.0
    assert k02.find("global", "c", "store").efficiency == 1.0
    warp_k_steps = 32 * 32 // 32 * 8
    assert k01.totals()["global load"]["cost"] == 33 * warp_k_steps  # 33 sectors per k step and warp
    assert k02.totals()["global load"]["cost"] == 5 * warp_k_steps  # 5


@pytest.mark.parametrize("tile", [4, 8])
def test_tiling_reads_tile_times_fewer_elements(tile):
    """k03 loads every A and B element from global memory once per T-wide tile step: the
    lanes ask for exactly T× fewer bytes than k02's (same block shape, T-multiple sizes).
    Sectors fall less (k02's A loads are warp broadcasts): 2.6× at T = 4, 4.9× at T = 8."""
    shape = "x".join([str(2 * tile)] * 3)
    naive = analyze.run("k02_coalesced", config=f"block_x={tile},block_y={tile}", shape=shape).totals()
    tiled = analyze.run("k03_smem_tiled", config=f"tile={tile}", shape=shape).totals()
    assert naive["global load"]["bytes"] == tile * tiled["global load"]["bytes"]
    assert naive["global load"]["cost"] > tile / 2 * tiled["global load"]["cost"]


# ---------------------------------------------------------------------------
# The race check
# ---------------------------------------------------------------------------

# rung, the module holding its barriers, a config with several warps per block, shape
BARRIER_CASES = [
    ("matmul", "k03_smem_tiled", k03_smem_tiled, "tile=8", "9x9x17"),
    ("matmul", "k09_double_buffered", k09_double_buffered, "bm=32,bn=32,bk=4,tm=4,tn=4", "32x32x9"),
    ("matmul", "k10_warptiled", k10_warptiled, "bm=32,bn=32,bk=4,wm=32,wn=16,tm=4,tn=4", "32x32x9"),
    ("conv2d", "k02_halo_tiled", k02_halo_tiled, "tile_w=8,tile_h=8", "10x9x3x3"),
    ("conv_nchw", "k02_smem_tiled", _tiled, "tile_h=4,tile_w=8,co=8,rco=2,rp=2,ck=2", "1x5x4x8x8x3x3"),
    ("conv_nchw", "k03_double_buffered", k03_double_buffered, "tile_h=4,tile_w=8,co=8,rco=2,rp=2,ck=2",
     "1x5x4x8x8x3x3"),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # a mutant may compute on uninitialised shared memory
@pytest.mark.parametrize("ladder, variant, module, config, shape", BARRIER_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in BARRIER_CASES])
def test_dropping_any_barrier_is_a_race(ladder, variant, module, config, shape):
    clean = analyze.run(variant, ladder=ladder, config=config, shape=shape)
    assert clean.races == []
    lines = pathlib.Path(module.__file__).read_text().splitlines()
    barriers = [i for i, line in enumerate(lines) if line.strip().startswith("cuda.syncthreads()")
                and (module.__file__, i + 1) in clean.barriers]  # the barriers this rung executes
    assert barriers, "no barrier of the module ran"
    rung = registry.ladder(ladder).rungs()[variant]
    for index in barriers:
        mutant = analyze.mutant_rung(rung, analyze.mutant_module(module, _drop_line(index)))
        report = analyze.run(variant, ladder=ladder, config=config, shape=shape, rung=mutant)
        assert report.race_count > 0, f"dropping the barrier at line {index + 1} went unnoticed"
        assert all(r.kind == "cross-warp" for r in report.races)


def test_race_report_is_deterministic_and_names_both_lines():
    """k03 without its WAR barrier (the second): the next step's stores race this step's reads."""
    lines = pathlib.Path(k03_smem_tiled.__file__).read_text().splitlines()
    war = [i for i, line in enumerate(lines) if line.strip().startswith("cuda.syncthreads()")][1]
    rung = analyze.mutant_rung(k03_smem_tiled.RUNG, analyze.mutant_module(k03_smem_tiled, _drop_line(war)))
    first, second = (analyze.run("k03_smem_tiled", config="tile=8", shape="9x9x17", rung=rung) for _ in range(2))
    assert first.race_count == second.race_count == 512
    [race] = first.races
    store = next(i for i, line in enumerate(lines) if "b_tile[ty, tx] =" in line) + 1
    load = next(i for i, line in enumerate(lines) if "acc += a_tile" in line) + 1
    assert (race.first, race.second, race.second_op) == (f"k03_smem_tiled.py:{store}", f"k03_smem_tiled.py:{load}",
                                                         "load")
    assert [str(r) for r in first.races] == [str(r) for r in second.races]


@pytest.mark.sim  # simt_tiles.analyze runs in the simulator
def test_two_byte_values_of_one_word_are_no_race():
    """Races are by byte: lanes storing 2-byte values into the halves of one 4-byte word (k05's ``spill_bits=16``)
    do not conflict; two lanes storing the same 2-byte value do."""
    def make(same):
        @cuda.jit
        def halves(out):
            buf = cuda.shared.array(64, uint16)
            t = cuda.threadIdx.x
            buf[t // 2 if same else t] = uint16(t)
            cuda.syncthreads()
            out[t] = buf[t // 2]
        return halves

    out = cuda.device_array(64, np.uint16)
    with analyze.racecheck():
        make(False)[1, 64](out)
    with pytest.raises(analyze.RaceError, match="intra-warp race on buf"):
        with analyze.racecheck():
            make(True)[1, 64](out)


def _softmax_reuse():
    """softmax k04 with row_sum given the max's partials (the bug the shared arrays avoid)."""
    mutant = analyze.mutant_module(k04_register_row, _edit("row_sum(s, red_s,", "row_sum(s, red_m,"))
    return analyze.mutant_rung(k04_register_row.RUNG, mutant)


def test_softmax_partials_reuse_is_a_race():
    # 77 columns at the sim preset: a row spans 2 warps, so the partials go through shared memory
    assert analyze.run("k04_register_row", ladder="softmax", shape="3x77").races == []
    report = analyze.run("k04_register_row", ladder="softmax", shape="3x77", rung=_softmax_reuse())
    assert report.race_count == 6  # per block: the 2 partials
    [race] = report.races
    assert race.kind == "cross-warp" and race.first.startswith("_common.py") and race.second_op == "load"


def test_racecheck_switch_raises_with_both_lines():
    """What SIMT_TILES_RACECHECK=1 / pytest --racecheck turn on for every launch."""
    import simt_tiles

    x = np.random.default_rng(1).standard_normal((3, 77)).astype(np.float32)
    rung = _softmax_reuse()
    analyze.enable_racecheck()
    try:
        with analyze._installed("softmax", rung), pytest.raises(analyze.RaceError, match=r"_common\.py:\d+.*_common\.py:\d+"):
            simt_tiles.softmax(x, variant="k04_register_row")
        simt_tiles.softmax(x, variant="k04_register_row")  # the shipped rung passes
    finally:
        if analyze._global_check is not None and not _env_racecheck():
            analyze.disable_racecheck()


def _env_racecheck():
    from simt_tiles._pytest_racecheck import racecheck_requested

    return racecheck_requested()


SHIPPED_SHAPES = {"matmul": "7x5x9", "matmul_mma": "7x5x9", "conv2d": "7x6x3x2", "conv_nchw": "1x2x5x4x3x3x3", "softmax": "2x77",
                  "reduce": "3x37"}
#: a rung whose layer needs another shape than its ladder's (the depthwise rung: C_OUT a multiple of C)
RUNG_SHAPES = {("conv_nchw", "k04_depthwise"): "1x2x5x4x4x3x3"}
SHIPPED = [(lad, name) for lad, rungs in registry.ladders().items() for name in rungs]


@pytest.mark.parametrize("ladder, variant", SHIPPED, ids=[f"{lad}-{name}" for lad, name in SHIPPED])
def test_shipped_rungs_have_no_races(ladder, variant):
    shape = (RUNG_SHAPES.get((ladder, variant)) or SHIPPED_SHAPES.get(ladder)
             or ("5x9" if variant == "bias_relu" else "37"))
    report = analyze.run(variant, ladder=ladder, shape=shape)
    assert report.races == [], "\n".join(map(str, report.races))
    assert not report.uninitialized
    assert report.blocks > 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_missing_tile_load_reads_uninitialised_shared_memory():
    lines = pathlib.Path(k03_smem_tiled.__file__).read_text().splitlines()
    store = next(i for i, line in enumerate(lines) if "b_tile[ty, tx] =" in line)
    rung = analyze.mutant_rung(k03_smem_tiled.RUNG, analyze.mutant_module(k03_smem_tiled, _drop_line(store)))
    report = analyze.run("k03_smem_tiled", config="tile=4", shape="5x6x7", rung=rung)
    [(where, loads)] = report.uninitialized.items()
    load = next(i for i, line in enumerate(lines) if "acc += a_tile" in line) + 1
    assert where == f"k03_smem_tiled.py:{load}" and loads > 0
    assert "uninitialised shared memory read" in report.format()


# ---------------------------------------------------------------------------
# The command line and bad input
# ---------------------------------------------------------------------------


def test_cli_prints_the_table(capsys):
    assert analyze.main(["k06_transposed", "--config", LESSON, "--shape", LESSON_SHAPE]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if " a_t " in line and " store " in line)
    assert "8.00" in row.split()
    assert "no shared-memory races" in out


def test_cli_exit_status_on_a_race(capsys, monkeypatch):
    real_run = analyze.run
    monkeypatch.setattr(analyze, "run", lambda *a, **k: real_run(*a, **{**k, "rung": _softmax_reuse()}))
    assert analyze.main(["k04_register_row", "--ladder", "softmax"]) == 1
    assert "cross-warp race on red" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["k99"], "variant"),
    (["k03_smem_tiled", "--shape", "3x4"], "shape"),
    (["k03_smem_tiled", "--config", "nope"], "config"),
    (["k03_smem_tiled", "--config", "tile=x"], "tile"),
    (["k01_naive", "--ladder", "nope"], "ladder"),
])
def test_cli_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        analyze.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_a_negative_seed_is_named(capsys):
    """NumPy's own message ("expected non-negative integer") named no argument."""
    with pytest.raises(SystemExit) as exc:
        analyze.main(["k03_smem_tiled", "--seed", "-1"])
    assert exc.value.code == 2 and "error: seed: expected an int >= 0; got -1" in capsys.readouterr().err


def test_parse_config():
    rung = k07_padded.RUNG
    assert analyze.parse_config(rung, "pad=4") == dataclasses.replace(rung.presets["sim"], pad=4)
    assert analyze.parse_config(rung, "default:pad=1") == dataclasses.replace(rung.presets["default"], pad=1)
    assert analyze.parse_config(rung, "default") is rung.presets["default"]
