"""simt_tiles.pictures: the bank layout is the analyzer's wavefront count, the panels come from
the analyzer's records, and ``simt-tiles analyze --plot`` writes a PNG."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from simt_tiles import analyze, pictures  # noqa: E402
from simt_tiles.runtime import SIMULATOR  # noqa: E402

# the analyzer records accesses in Numba's CUDA simulator: its pictures are drawn there only
needs_sim = pytest.mark.skipif(not SIMULATOR, reason="the analyzer runs in the CUDA simulator")

MODEL = {"banks": analyze.BANKS, "sector": analyze.SECTOR, "lanes_per_pass": analyze.LANES_PER_PASS}


def _rows(accesses):
    return max(r for _, r, _, _ in pictures.bank_rows(accesses, analyze.BANKS, analyze.LANES_PER_PASS)) + 1


@pytest.mark.parametrize("accesses", [
    [(i, 4 * i, 4) for i in range(32)],  # 32 consecutive words: one wavefront
    [(i, 0, 4) for i in range(32)],  # one word for all: a broadcast
    [(i, 4 * 32 * i, 4) for i in range(32)],  # a column of a 32-wide tile: 32-way
    [(i, 4 * 33 * i, 4) for i in range(32)],  # padded to 33: conflict-free
    [(i, 16 * i, 16) for i in range(32)],  # 128-bit: per half-warp, 4 + 4
    [(i, 32 * (i % 16), 16) for i in range(32)],  # k06's B read
])
def test_bank_rows_are_the_analyzers_wavefronts(accesses):
    assert _rows(accesses) == analyze.wavefronts(accesses)


def test_bank_rows_label_every_lane_once():
    cells = pictures.bank_rows([(i, 4 * 8 * (i % 8) + 4 * (i // 8), 4) for i in range(32)], 32, {4: 32})
    assert sorted(lane for *_, lanes in cells for lane in lanes) == list(range(32))


@pytest.fixture(scope="module")
def k06():
    return analyze.run("k06_transposed", config="bm=32,bn=32,bk=8,tm=4,tn=8", shape="32x32x8", races=False)


@needs_sim
def test_requests_show_k06s_8_way_store(k06):
    reqs, shapes = pictures.requests(k06)
    store = next(acc for key, lists in reqs.items() for acc in lists[:1]
                 if key[0] == "shared" and key[2] == "a_t" and key[3] == "store")
    assert _rows(store) == 8 == k06.find("shared", "a_t", "store").per_request
    assert shapes["c"] == (32, 32) and shapes["a"] == (32, 8)


@needs_sim
def test_lesson_figure_has_four_titled_panels(k06, tmp_path):
    fig = pictures.lesson_figure(k06, "k06", **MODEL)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert any("8-way" in t for t in titles) and any("sectors" in t for t in titles), titles
    assert any("thread → element" in t for t in titles) and any("block 0 reads" in t for t in titles), titles
    fig.savefig(tmp_path / "k06.png")
    assert (tmp_path / "k06.png").stat().st_size > 10_000


@needs_sim
def test_analyze_plot_option_writes_a_png(tmp_path, capsys):
    out = tmp_path / "k03.png"
    assert analyze.main(["k03_smem_tiled", "--config", "tile=4", "--shape", "5x6x4", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in capsys.readouterr().out


# --- tensor-core fragment maps ------------------------------------------------------------------

def _ptx_layout(precision):
    """{matrix: {(row, column): (lane, register)}} typed from the PTX ISA's fragment tables (g = lane >> 2,
    t = lane & 3), independently of simt_tiles.mma: the picture must agree with both."""
    cells = {"A": {}, "B": {}, "C": {}}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for r, (i, j) in enumerate([(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]):
            cells["C"][i, j] = (lane, f"c{r}")
        if precision == "tf32":
            for r, (i, k) in enumerate([(g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4)]):
                cells["A"][i, k] = (lane, f"a{r}")
            for r, k in enumerate([t, t + 4]):
                cells["B"][k, g] = (lane, f"b{r}")
        else:
            for r, (i, k) in enumerate([(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)]):
                cells["A"][i, k] = cells["A"][i, k + 1] = (lane, f"a{r}")
            for r, k in enumerate([2 * t, 2 * t + 8]):
                cells["B"][k, g] = cells["B"][k + 1, g] = (lane, f"b{r}")
    return cells


def _drawn(fig):
    """{panel letter: {(row, column): (lane, register)}} read back from the figure's cell labels."""
    out = {}
    for ax in fig.axes:
        name = ax.get_title()[:1]
        cells = {}
        for text in ax.texts:
            x, y = text.get_position()
            lane, reg = text.get_text().split("\n")
            cells[int(y), int(x)] = (int(lane), reg)
        out[name] = cells
    return out


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_fragment_figure_cells_are_the_fragment_helpers(precision):
    """Every cell of the picture is the lane and register that simt_tiles.mma's fragment helpers (the
    emulation's layout) put there, and that the PTX ISA's table says: an element of a random matrix
    sits in exactly that lane's register."""
    import numpy as np

    from simt_tiles import mma

    cells = pictures.fragment_cells(precision)
    assert cells == _ptx_layout(precision)
    a_shape, b_shape = pictures.MMA_SHAPES[precision][1:]
    rng = np.random.default_rng(31)
    for name, shape, frag in (("A", a_shape, lambda x: mma.fragment_a(x, precision)),
                              ("B", b_shape, lambda x: mma.fragment_b(x, precision)), ("C", (16, 8), mma.fragment_c)):
        x = rng.standard_normal(shape)
        f = np.asarray(frag(x))  # (32, registers) or, 16-bit, (32, registers, 2)
        for (i, j), (lane, reg) in cells[name].items():
            assert x[i, j] in np.asarray(f[lane, int(reg[1])]).ravel(), (name, i, j, lane, reg)
        assert len(cells[name]) == shape[0] * shape[1]
    fig = pictures.fragment_figure(precision)
    assert _drawn(fig) == cells
    assert "mma.sync.m16n8k" in fig._suptitle.get_text()


def test_fragment_figure_shows_a_planted_swap(monkeypatch):
    """a1 and a2 swapped in the helper the picture reads: the drawn map no longer matches the PTX table."""
    import numpy as np

    from simt_tiles import mma

    real = mma.fragment_a

    def swapped(a, precision):
        f = np.array(real(a, precision))
        f[:, [1, 2]] = f[:, [2, 1]]
        return f

    monkeypatch.setattr(mma, "fragment_a", swapped)
    drawn = _drawn(pictures.fragment_figure("tf32"))
    want = _ptx_layout("tf32")
    assert drawn["B"] == want["B"] and drawn["C"] == want["C"]
    wrong = {ij for ij in want["A"] if drawn["A"][ij] != want["A"][ij]}
    assert (8, 0) in wrong and (0, 4) in wrong and len(wrong) == 64
    assert drawn["A"][8, 0] == (0, "a2")


def test_fragment_cells_bad_precision():
    with pytest.raises(ValueError, match="precision: expected one of"):
        pictures.fragment_cells("fp8")


def test_tensor_core_lesson_page_shows_the_fragment_map(tmp_path, monkeypatch):
    """docs/generate.py draws the map on the k13 page (CI's docs build skips the pictures:
    SIMT_TILES_DOCS_PICTURES=0; this draws k13's, ~2 s; k14's bf16 map is the figure tested above)."""
    from pathlib import Path

    from simt_tiles import registry

    monkeypatch.setenv("SIMT_TILES_DOCS_PICTURES", "1")
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "docs"))
    import generate

    assert generate.FRAGMENT_PICTURES == {("matmul_mma", "k13_mma_tf32"): "tf32", ("matmul_mma", "k14_mma_bf16"): "bf16"}
    rung = "k13_mma_tf32"
    generate.lessons(tmp_path, {"matmul_mma": {rung: registry.ladders()["matmul_mma"][rung]}}, {})
    page = (tmp_path / "lessons" / "matmul_mma" / f"{rung}.md").read_text()
    assert f"```{{image}} {rung}_fragments.png" in page and "## The fragment map" in page, page[:2000]
    png = tmp_path / "lessons" / "matmul_mma" / f"{rung}_fragments.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
