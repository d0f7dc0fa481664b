"""simt_tiles.pictures: the bank layout is the analyzer's wavefront count, the panels come from
the analyzer's records, and ``simt-tiles analyze --plot`` writes a PNG."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from simt_tiles import analyze, pictures  # noqa: E402

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


def test_requests_show_k06s_8_way_store(k06):
    reqs, shapes = pictures.requests(k06)
    store = next(acc for key, lists in reqs.items() for acc in lists[:1]
                 if key[0] == "shared" and key[2] == "a_t" and key[3] == "store")
    assert _rows(store) == 8 == k06.find("shared", "a_t", "store").per_request
    assert shapes["c"] == (32, 32) and shapes["a"] == (32, 8)


def test_lesson_figure_has_four_titled_panels(k06, tmp_path):
    fig = pictures.lesson_figure(k06, "k06", **MODEL)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert any("8-way" in t for t in titles) and any("sectors" in t for t in titles), titles
    assert any("thread → element" in t for t in titles) and any("block 0 reads" in t for t in titles), titles
    fig.savefig(tmp_path / "k06.png")
    assert (tmp_path / "k06.png").stat().st_size > 10_000


def test_analyze_plot_option_writes_a_png(tmp_path, capsys):
    out = tmp_path / "k03.png"
    assert analyze.main(["k03_smem_tiled", "--config", "tile=4", "--shape", "5x6x4", "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in capsys.readouterr().out
