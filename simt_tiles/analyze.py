"""See the memory lessons without a GPU: bank conflicts, coalescing and races, in the simulator.

``python -m simt_tiles.analyze k06_transposed --config bm=32,bn=32,bk=8,tm=4,tn=8 --shape 32x32x8``
runs one rung in Numba's CUDA simulator with its shared and global arrays
instrumented and prints, per access site (source line):

* **shared memory: wavefronts per warp-wide request** — the bank model of
  sm_90: 32 banks of 4 bytes, word ``w`` in bank ``w % 32``; a request takes as
  many wavefronts as the most distinct words any one bank must deliver (a
  word read by many lanes is broadcast: free).  8- and 16-byte accesses are
  processed per half-warp, each half adding its own wavefronts (16 bytes: the
  Nsight Compute counts of k03 and k06 fit this and not quarter-warps — a
  broadcast 128-bit load costs 2, see tests/test_analyze.py; 8 bytes: not
  measured here).  1.0 is conflict-free; k06's transposed A store is 8.0.
* **global memory: 32-byte sectors per request** — how many sectors the
  lanes' bytes touch (allocations 256-byte aligned, as ``cudaMalloc``'s), and
  the fraction of the fetched bytes the lanes asked for.  k01's A read: 32
  sectors for 32 floats (12.5%); k02's: 4 (100%).
* per-kernel totals (requests, wavefronts, sectors, bytes), and
* the **race report**: conflicting shared-memory accesses within one barrier
  interval of one block, with the two source lines, and shared loads of words
  that no thread of the block wrote in an earlier interval (uninitialised).

A warp-wide *request* is the accesses the active lanes of one warp make at one
site in one dynamic execution: lanes are paired by how many times each has
executed that site (its n-th load there goes with the other lanes' n-th).
The simulator runs the source as written, so numbers are per source access:
where the GPU compiler merges consecutive 4-byte accesses into one 128-bit
access (k06's reads), the GPU issues fewer, wider requests than counted here.

Races.  Two accesses conflict when they touch the same shared byte (found by
4-byte word) in the same block and barrier interval (between the same two ``syncthreads``),
at least one writes, and (a) they come from different warps, or (b) two
different lanes of one warp *write* it between the same two ``syncwarp``
calls.  Intra-warp read/write pairs are not reported by default (pass
``intra_warp="all"`` for them): with independent thread scheduling (Volta and
later) the lanes of a warp are not ordered either, but many warp-synchronous
idioms read what another lane wrote after a shuffle; choose "all" to flag
those too.  The check is by barrier interval, not by the simulator's thread
order, so it is deterministic: a race is reported whether or not this run
happened to expose it.  Shared arrays keep the simulator's per-source-line
identity (two arrays declared on different lines never alias).

Switches: ``pytest --racecheck`` or ``SIMT_TILES_RACECHECK=1`` under pytest (the
plugin :mod:`simt_tiles._pytest_racecheck`, registered in ``tests/conftest.py``)
race-check every simulated launch and make a racy one raise :class:`RaceError`;
in a script, :func:`enable_racecheck` (or ``with racecheck():``) does the same.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import importlib
import os
import sys
import types
from collections.abc import Callable

import numpy as np

from . import _simhooks, registry
from ._options import output_file
from ._simhooks import SHARED

__all__ = [
    "Race",
    "RaceError",
    "Report",
    "SiteStat",
    "disable_racecheck",
    "enable_racecheck",
    "main",
    "mutant_module",
    "mutant_rung",
    "parse_config",
    "racecheck",
    "recording",
    "run",
    "sectors",
    "wavefronts",
]

WARP = 32
BANKS = 32
SECTOR = 32
#: lanes served together, by access size in bytes (a request is split into such groups)
LANES_PER_PASS = {1: 32, 2: 32, 4: 32, 8: 16, 16: 16}
INTRA_WARP = ("write-write", "all", "none")


# ---------------------------------------------------------------------------
# The two memory models
# ---------------------------------------------------------------------------


def wavefronts(accesses) -> int:
    """Shared-memory wavefronts of one warp-wide request: ``accesses`` are ``(lane, byte address, size)``."""
    passes: dict = collections.defaultdict(lambda: collections.defaultdict(set))
    for lane, addr, size in accesses:
        banks = passes[lane // LANES_PER_PASS.get(size, 16)]
        for word in range(addr >> 2, ((addr + size - 1) >> 2) + 1):
            banks[word % BANKS].add(word)
    return sum(max(len(words) for words in banks.values()) for banks in passes.values())


def sectors(accesses) -> int:
    """Distinct 32-byte sectors touched by one warp-wide request of ``(lane, byte address, size)``."""
    return len({s for _, addr, size in accesses for s in range(addr // SECTOR, (addr + size - 1) // SECTOR + 1)})


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class SiteStat:
    """One access site: a source line, an array, loads or stores, in shared or global memory."""

    space: str  # "shared" or "global"
    file: str
    line: int
    array: str
    op: str  # "load" or "store"
    requests: int = 0
    lanes: int = 0  # lane-accesses over all requests
    cost: int = 0  # wavefronts (shared) or sectors (global), summed over requests
    bytes: int = 0  # bytes the lanes asked for, over all requests
    unique_bytes: int = 0  # the same, counting an address read by several lanes of a request once

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    @property
    def per_request(self) -> float:
        """Wavefronts (shared) or sectors (global) per warp-wide request."""
        return self.cost / self.requests if self.requests else 0.0

    @property
    def efficiency(self) -> float:
        """Global: distinct bytes the lanes asked for / bytes of the sectors fetched."""
        return self.unique_bytes / (self.cost * SECTOR) if self.cost else 0.0


@dataclasses.dataclass
class Race:
    """Conflicting accesses between two sites: ``first`` writes, ``second`` reads or writes."""

    kind: str  # "cross-warp" or "intra-warp"
    first: str  # "file:line" of the write
    second: str  # "file:line" of the other access
    second_op: str  # "load" or "store"
    array: str
    locations: int = 0  # conflicting (block, barrier interval, word) triples
    example: str = ""

    def __str__(self):
        other = "write" if self.second_op == "store" else "read"
        return (f"{self.kind} race on {self.array}: write at {self.first} and {other} at {self.second} "
                f"with no barrier between them ({self.locations} conflicting words; e.g. {self.example})")


class RaceError(AssertionError):
    """A shared-memory race found by the race check (the message names both source lines)."""


class Report:
    """What one recording saw: per-site statistics, totals, races."""

    def __init__(self, intra_warp: str = "write-write", races: bool = True):
        if intra_warp not in INTRA_WARP:
            raise ValueError(f"intra_warp: expected one of {INTRA_WARP}; got {intra_warp!r}")
        self.intra_warp = intra_warp
        self.check_races = races
        self._sites: dict = {}
        self._races: dict = {}
        self.race_count = 0  # conflicting (block, interval, word) locations
        #: shared loads of words no thread of the block had written in an earlier barrier
        #: interval (nor in the same one: that would be a race), by "file:line"
        self.uninitialized: collections.Counter = collections.Counter()
        self.blocks = 0
        self.names: dict = {}
        #: (file, line) of every ``syncthreads`` the recorded launches executed
        self.barriers: set = set()
        self.config = None  # set by :func:`run`: the config the rung ran with
        #: (block, records) of the first block recorded, and array key -> shape: what
        #: :mod:`simt_tiles.pictures` draws
        self.first_block = None
        self.shapes: dict = {}

    # -- building ---------------------------------------------------------------------
    def add_block(self, block, records) -> list[Race]:
        """Fold one block's access records in; returns the races found in this block."""
        self.blocks += 1
        if self.first_block is None:
            self.first_block = (block, records)
        requests: dict = collections.defaultdict(list)
        for space, site, occ, warp, lane, _interval, _ws, key, addr, size, is_write in records:
            requests[(space, site, key, is_write, warp, occ)].append((lane, addr, size))
        for (space, site, key, is_write, _w, _o), acc in requests.items():
            name = self.names.get((site, key), "?")
            row_key = (space, site[0], site[1], name, is_write)
            st = self._sites.get(row_key)
            if st is None:
                st = self._sites[row_key] = SiteStat(space, site[0], site[1], name, "store" if is_write else "load")
            st.requests += 1
            st.lanes += len(acc)
            st.bytes += sum(a[2] for a in acc)
            st.unique_bytes += sum(size for _, size in {(a[1], a[2]) for a in acc})
            st.cost += wavefronts(acc) if space == SHARED else sectors(acc)
        self._find_uninitialized(records)
        return self._find_races(block, records) if self.check_races else []

    def _find_uninitialized(self, records):
        first_write: dict = {}
        for space, _site, _occ, _warp, _lane, interval, _ws, key, addr, _size, is_write in records:
            if space == SHARED and is_write and first_write.get((key, addr), interval + 1) > interval:
                first_write[(key, addr)] = interval
        for space, site, _occ, _warp, _lane, interval, _ws, key, addr, _size, is_write in records:
            if space == SHARED and not is_write and first_write.get((key, addr), interval + 1) > interval:
                self.uninitialized[_where(site)] += 1

    def _find_races(self, block, records) -> list[Race]:
        locs: dict = collections.defaultdict(list)
        for space, site, _occ, warp, lane, interval, wsync, key, addr, size, is_write in records:
            if space != SHARED:
                continue
            for word in range(addr >> 2, ((addr + size - 1) >> 2) + 1):
                # the bytes of the word it touches (a mask): 2-byte values of two lanes share a word, not a byte
                lo, hi = max(addr, 4 * word) - 4 * word, min(addr + size, 4 * word + 4) - 4 * word
                mask = (1 << hi) - (1 << lo)
                locs[(key, interval, word)].append((warp, lane, wsync, site, is_write, mask))
        found = []
        for (key, interval, word), accs in sorted(locs.items(), key=lambda kv: (kv[0][1], kv[0][2], str(kv[0][0]))):
            writers = [a for a in accs if a[4]]
            if not writers:
                continue
            pairs = set()
            if len({a[0] for a in accs}) > 1:
                wsites = {(a[0], a[3], a[5]) for a in writers}
                others = {(a[0], a[3], a[4], a[5]) for a in accs}
                for ww, ws, wm in wsites:
                    for ow, os_, ok, om in others:
                        if ow != ww and wm & om:
                            pairs.add(("cross-warp",) + _ordered(ws, os_, ok))
            if self.intra_warp != "none":
                by_warp: dict = collections.defaultdict(list)
                for a in accs:
                    by_warp[(a[0], a[2])].append(a)
                for group in by_warp.values():
                    for w in (a for a in group if a[4]):
                        for o in group:
                            if o[1] != w[1] and w[5] & o[5] and (o[4] or self.intra_warp == "all"):
                                pairs.add(("intra-warp",) + _ordered(w[3], o[3], o[4]))
            if not pairs:
                continue
            self.race_count += 1
            warps = sorted({a[0] for a in accs})
            for kind, first, second, second_write in sorted(pairs):
                name = self._array_name(key, accs)
                rk = (kind, first, second, second_write, name)
                race = self._races.get(rk)
                if race is None:
                    race = self._races[rk] = Race(
                        kind, _where(first), _where(second), "store" if second_write else "load", name,
                        example=f"block {block}, barrier interval {interval}, {name} byte {4 * word}, "
                                f"warps {warps}")
                    found.append(race)
                race.locations += 1
        return found

    def _array_name(self, key, accs):
        for a in accs:
            name = self.names.get((a[3], key))
            if name and name != "?":
                return name
        return "<dynamic shared>" if key[0] == "<dynamic shared>" else f"shared array of {_where(key)}"

    # -- reading ----------------------------------------------------------------------
    @property
    def sites(self) -> list[SiteStat]:
        return sorted(self._sites.values(), key=lambda s: (s.space != SHARED, s.file, s.line, s.op, s.array))

    @property
    def races(self) -> list[Race]:
        return sorted(self._races.values(), key=lambda r: (r.first, r.second, r.kind, r.array))

    def find(self, space: str, array: str, op: str) -> SiteStat:
        """The one site of ``array`` (its variable name) doing ``op`` in ``space`` (sites on several
        lines are summed into one SiteStat)."""
        rows = [s for s in self._sites.values() if (s.space, s.array, s.op) == (space, array, op)]
        if not rows:
            raise KeyError(f"no {space} {op} of {array!r}; sites: {[(s.space, s.array, s.op) for s in self.sites]}")
        out = SiteStat(space, rows[0].file, rows[0].line, array, op)
        for r in rows:
            out.requests += r.requests
            out.lanes += r.lanes
            out.cost += r.cost
            out.bytes += r.bytes
            out.unique_bytes += r.unique_bytes
        return out

    def totals(self) -> dict:
        """Per (space, op): requests, wavefronts or sectors, bytes."""
        out: dict = {}
        for s in self._sites.values():
            t = out.setdefault(f"{s.space} {s.op}", {"requests": 0, "cost": 0, "bytes": 0})
            t["requests"] += s.requests
            t["cost"] += s.cost
            t["bytes"] += s.bytes
        return out

    def format(self) -> str:
        lines = [(f"{'site':<28} {'array':<10} {'op':<5} {'requests':>8} {'lanes/req':>9} "
                  f"{'wavefronts/req':>14} {'sectors/req':>11} {'efficiency':>10}")]
        for s in self.sites:
            shared = s.space == SHARED
            lines.append(
                f"{s.where:<28} {s.array:<10} {s.op:<5} {s.requests:>8} {s.lanes / s.requests:>9.1f} "
                f"{(f'{s.per_request:.2f}' if shared else '-'):>14} {('-' if shared else f'{s.per_request:.2f}'):>11} "
                f"{('-' if shared else f'{100 * s.efficiency:.1f}%'):>10}")
        lines.append("")
        for name, t in sorted(self.totals().items()):
            unit = "wavefronts" if name.startswith(SHARED) else "sectors"
            lines.append(f"total {name:<13} {t['requests']:>8} requests {t['cost']:>9} {unit} {t['bytes']:>10} bytes")
        lines.append("")
        if not self.check_races:
            lines.append("race check: off")
        elif not self._races:
            lines.append(f"race check: no shared-memory races ({self.blocks} blocks)")
        else:
            lines.append(f"race check: {self.race_count} conflicting shared words")
            lines.extend(f"  {r}" for r in self.races)
        if self.uninitialized:
            lines.append("uninitialised shared memory read (never written before, in this block): " + ", ".join(
                f"{where} ({n} loads)" for where, n in sorted(self.uninitialized.items())))
        return "\n".join(lines)


def _ordered(write_site, other_site, other_write):
    """A canonical (first, second, second is a write) so write/write pairs are counted once."""
    if other_write and other_site < write_site:
        return other_site, write_site, True
    return write_site, other_site, other_write


def _where(site) -> str:
    return f"{os.path.basename(site[0])}:{site[1]}"


# ---------------------------------------------------------------------------
# Recording
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def recording(*, races: bool = True, intra_warp: str = "write-write", global_: bool = True,
              raise_races: bool = False):
    """Record every simulated launch inside the ``with`` into the yielded :class:`Report`;
    ``raise_races``: the first racy block raises :class:`RaceError` (:func:`racecheck`)."""
    report = Report(intra_warp, races)
    rec = _simhooks.Recorder(None, global_=global_)
    report.names, report.barriers, report.shapes = rec.names, rec.barriers, rec.shapes

    def on_block(block, records):
        found = report.add_block(block, records)
        if found and raise_races:
            raise RaceError("shared-memory race: " + "; ".join(str(r) for r in found))

    rec.on_block = on_block
    _simhooks.install()
    prev, _simhooks.active = _simhooks.active, rec
    try:
        yield report
    finally:
        _simhooks.active = prev
        _simhooks.uninstall()


def racecheck(*, intra_warp: str = "write-write"):
    """Race-check every simulated launch inside the ``with``; the first racy block raises :class:`RaceError`."""
    return recording(intra_warp=intra_warp, global_=False, raise_races=True)


_global_check = None


def enable_racecheck(intra_warp: str = "write-write") -> None:
    """Race-check every simulated launch from now on (``SIMT_TILES_RACECHECK=1``)."""
    global _global_check
    if _global_check is None:
        import atexit

        _global_check = racecheck(intra_warp=intra_warp)
        _global_check.__enter__()
        atexit.register(disable_racecheck)  # undone while imports still work, not at interpreter teardown


def disable_racecheck() -> None:
    global _global_check
    if _global_check is not None:
        _global_check.__exit__(None, None, None)
        _global_check = None


# ---------------------------------------------------------------------------
# Running a rung
# ---------------------------------------------------------------------------

#: per ladder: the shape the CLI uses when none is given (small, ragged)
DEFAULT_SHAPES = {
    "matmul": "33x17x9",  # M x N x K
    "matmul_mma": "33x17x9",  # M x N x K (k13: float32 as TF32; k14: bfloat16 bits)
    "conv2d": "13x11x3x3",  # H x W x KH x KW
    "conv_nchw": "1x3x7x6x5x3x3",  # N x C x H x W x C_out x KH x KW (padding KH // 2; k04: groups C)
    "softmax": "3x77",  # rows x columns
    "reduce": "3x37",  # rows x columns (axis -1); one number: the whole array
    "elementwise": "37",  # vector_add: N; bias_relu: M x N
}
SHAPE_HELP = {
    "matmul": "MxNxK", "matmul_mma": "MxNxK or BxMxNxK (a batch)",
    "conv2d": "HxWxKHxKW (volume rungs: DxHxWxKDxKHxKW too)", "conv_nchw": "NxCxHxWxC_OUTxKHxKW",
    "softmax": "ROWSxCOLS", "reduce": "ROWSxCOLS or N", "elementwise": "N (vector_add) or MxN (bias_relu)",
}


def _drive(ladder: str, name: str, cfg, dims, dtype, rng):
    """Call ``ladder``'s public function for rung ``name`` on random data of shape ``dims``."""
    def rand(*shape):
        return rng.standard_normal(shape).astype(dtype)

    def need(k):
        if len(dims) != k:
            raise ValueError(f"shape: expected {SHAPE_HELP[ladder]} for the {ladder} ladder; got {'x'.join(map(str, dims))}")

    fam = importlib.import_module(registry.ladder(ladder).module)  # the family's package, from the registry
    if ladder == "matmul":
        need(3)
        m, n, k = dims
        fam.matmul(rand(m, k), rand(k, n), variant=name, config=cfg)
    elif ladder == "matmul_mma":
        if len(dims) != 4:
            need(3)
        *batch, m, n, k = dims  # BxMxNxK: a batch of B products (the batched form, grid z)
        if name == "k13_mma_tf32":
            fam.matmul_mma(rand(*batch, m, k).astype("float32"), rand(*batch, k, n).astype("float32"), precision="tf32",
                           config=cfg)
        else:
            fam.matmul_mma(rand(*batch, m, k).astype("float16"), rand(*batch, k, n).astype("float16"), config=cfg)
    elif ladder == "conv2d" and name in fam.VOLUME_RUNGS:  # a volume: D x H x W x KD x KH x KW (or H x W x KH x KW)
        if len(dims) != 6:
            need(4)
            dims = (4, dims[0], dims[1], 3, dims[2], dims[3])  # 4 planes, 3 filter planes: the ring turns over
        d, h, w, kd, kh, kw = dims
        fam.correlate(rand(d, h, w), rand(kd, kh, kw), variant=name, config=cfg)
    elif ladder == "conv2d":
        need(4)
        h, w, kh, kw = dims
        if name in fam.SEPARABLE_RUNGS:
            fam.correlate_separable(rand(h, w), rand(kh), rand(kw), variant=name, config=cfg)
        else:
            fam.correlate2d(rand(h, w), rand(kh, kw), variant=name, config=cfg)
    elif ladder == "conv_nchw":
        need(7)
        n, c, h, w, co, kh, kw = dims
        if name == getattr(fam, "DEPTHWISE_VARIANT", None):  # groups = C: C_OUT a multiple of C
            if co % c:
                raise ValueError(f"shape: {name} runs a depthwise layer (groups = C): C_OUT must be a multiple of "
                                 f"C; got C = {c}, C_OUT = {co}")
            fam.conv2d_nchw(rand(n, c, h, w), rand(co, 1, kh, kw), bias=rand(co), padding=kh // 2, groups=c,
                            variant=name, config=cfg)
            return
        fam.conv2d_nchw(rand(n, c, h, w), rand(co, c, kh, kw), bias=rand(co), padding=kh // 2,
                        variant=name, config=cfg)
    elif ladder == "softmax":
        need(2)
        fam.softmax(rand(*dims), variant=name, config=cfg)
    elif ladder == "reduce":
        if len(dims) not in (1, 2):
            need(2)
        fam.reduce(rand(*dims), "sum", axis=None if len(dims) == 1 else -1, config=cfg)
    elif ladder == "elementwise":
        if name == "bias_relu":
            need(2)
            fam.bias_relu(rand(*dims), rand(dims[1]), config=cfg)
        else:
            need(1)
            fam.vector_add(rand(*dims), rand(*dims), variant=name, config=cfg)
    else:
        raise ValueError(f"ladder: no driver for {ladder!r}")


@contextlib.contextmanager
def _installed(ladder: str, rung):
    """Make the ladder's public function use ``rung`` (a mutant) for its name, for the ``with``."""
    fam = importlib.import_module(registry.ladder(ladder).module)
    undo = []
    for attr, value in list(vars(fam).items()):
        if isinstance(value, dict) and isinstance(value.get(rung.name), type(rung)) and value[rung.name] is not rung:
            undo.append((value, value[rung.name]))
            value[rung.name] = rung
        elif isinstance(value, type(rung)) and value.name == rung.name and value is not rung:
            undo.append((attr, value))
            setattr(fam, attr, rung)
    try:
        yield
    finally:
        for where, old in undo:
            if isinstance(where, dict):
                where[rung.name] = old
            else:
                setattr(fam, where, old)


def parse_config(rung, text):
    """A config for ``rung`` from a preset name, ``key=value,...`` (over the "sim" preset)
    or ``preset:key=value,...``; config objects pass through (converted to the rung's
    config class when they are of another class with the same fields, e.g. a mutant's)."""
    if text is None:
        text = "sim"
    if not isinstance(text, str):
        if not isinstance(text, rung.config_type) and dataclasses.is_dataclass(text):
            return rung.config_type(**{f.name: getattr(text, f.name) for f in dataclasses.fields(text)})
        return text
    preset, _, fields = text.partition(":") if ":" in text else (("sim", "", text) if "=" in text else (text, "", ""))
    base = rung.resolve_config(preset)
    if not fields:
        return base
    kv = {}
    for item in fields.split(","):
        key, eq, value = item.partition("=")
        names = [f.name for f in dataclasses.fields(base)]
        if not eq or key.strip() not in names:
            raise ValueError(f"config: expected a preset name or key=value pairs with keys from {names}; got {item!r}")
        try:
            kv[key.strip()] = int(value)
        except ValueError:
            raise ValueError(f"config: {key.strip()} expected an int; got {value!r}") from None
    return dataclasses.replace(base, **kv)


def _find_ladder(variant: str) -> str:
    owners = [name for name, rungs in registry.ladders().items() if variant in rungs]
    if len(owners) != 1:
        every = {name: sorted(rungs) for name, rungs in registry.ladders().items()}
        raise ValueError(f"variant: {'ambiguous' if owners else 'unknown'} {variant!r} "
                         f"(in ladders {owners}); pass ladder= one of {every}")
    return owners[0]


def run(variant: str, *, ladder: str | None = "matmul", config=None, shape: str | None = None,
        dtype="float32", seed: int = 0, rung=None, races: bool = True,
        intra_warp: str = "write-write") -> Report:
    """Run one rung once in the simulator, recorded; returns its :class:`Report`.

    ``ladder`` None finds the ladder that has ``variant``.  ``config``: see
    :func:`parse_config` (default the "sim" preset).  ``shape``: ``"33x17x9"``-style
    (see :data:`DEFAULT_SHAPES`).  ``rung``: run this Rung object (e.g. a
    :func:`mutant_rung`) under ``variant``'s name instead of the shipped one.
    """
    if ladder is None:
        ladder = _find_ladder(variant)
    rungs = registry.ladder(ladder).rungs()
    if variant not in rungs:
        raise ValueError(f"variant: expected one of {sorted(rungs)} for the {ladder} ladder; got {variant!r}")
    rung = rung if rung is not None else rungs[variant]
    cfg = parse_config(rung, config)
    shape = shape or DEFAULT_SHAPES[ladder]
    try:
        dims = tuple(int(v) for v in str(shape).lower().split("x"))
    except ValueError:
        raise ValueError(f"shape: expected {SHAPE_HELP[ladder]} (integers joined by 'x'); got {shape!r}") from None
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"dtype: expected float32 or float64; got {dt}")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):  # (NumPy's message names no argument)
        raise ValueError(f"seed: expected an int >= 0; got {seed!r}") from None
    with _installed(ladder, rung), recording(races=races, intra_warp=intra_warp) as report:
        _drive(ladder, variant, cfg, dims, dt, rng)
    report.config = cfg
    return report


# ---------------------------------------------------------------------------
# Mutants (for tests and exercises): a module's source, edited, as a fresh module
# ---------------------------------------------------------------------------

_mutants = 0


def mutant_module(module: types.ModuleType | str, edit: Callable[[list[str]], list[str]]) -> types.ModuleType:
    """A fresh copy of ``module`` whose source lines went through ``edit`` (keep the line
    count, so reports point at the shipped file's lines).  The shipped module is untouched."""
    global _mutants
    if isinstance(module, str):
        module = importlib.import_module(module)
    with open(module.__file__, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    source = "".join(edit(list(lines)))
    _mutants += 1
    name = f"{module.__name__}__mutant{_mutants}"
    mod = types.ModuleType(name)
    mod.__file__ = module.__file__
    mod.__package__ = module.__package__
    sys.modules[name] = mod  # dataclasses look their module up
    try:
        exec(compile(source, module.__file__, "exec"), mod.__dict__)  # noqa: S102 -- the project's own source, edited
    finally:
        del sys.modules[name]
    return mod


def mutant_rung(rung, mutant: types.ModuleType):
    """``rung`` with its factory built from ``mutant`` (a :func:`mutant_module` of the module that
    defines the factory, or of a helper module the factory calls)."""
    factory = rung.factory
    original = sys.modules[mutant.__name__.rsplit("__mutant", 1)[0]]
    if factory.__module__ == original.__name__:  # the factory itself is mutated (the config class stays)
        return dataclasses.replace(rung, factory=getattr(mutant, factory.__name__))
    globs = dict(factory.__globals__)
    swapped = False
    for key, value in factory.__globals__.items():
        if value is original:
            globs[key], swapped = mutant, True
        elif getattr(value, "__module__", None) == original.__name__ and hasattr(mutant, getattr(value, "__name__", "")):
            globs[key], swapped = getattr(mutant, value.__name__), True
    if not swapped:
        raise ValueError(f"mutant_rung: {rung.name}'s factory does not use {original.__name__}")
    new = types.FunctionType(factory.__code__, globs, factory.__name__, factory.__defaults__, factory.__closure__)
    return dataclasses.replace(rung, factory=new)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    """``simt-tiles analyze VARIANT [--ladder L] [--config C] [--shape S] [--dtype D]``; exit 1 on a race."""
    p = argparse.ArgumentParser(
        prog="simt-tiles analyze",
        description="Run one rung in the CUDA simulator and report shared-memory bank conflicts "
                    "(wavefronts per request), global coalescing (sectors per request) and races.")
    p.add_argument("variant", help="a rung name, e.g. k06_transposed")
    p.add_argument("--ladder", default="matmul", help="the ladder (default matmul)")
    p.add_argument("--config", default="sim",
                   help="a preset name (sim, default, ...), key=value,... over sim, or preset:key=value,...")
    p.add_argument("--shape", default=None, help="; ".join(f"{k}: {v}" for k, v in SHAPE_HELP.items()))
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--intra-warp", default="write-write", choices=INTRA_WARP,
                   help="which same-warp conflicts count as races (default write-write)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", metavar="PNG", type=output_file,
                   help="also draw block 0's accesses (banks, sectors, thread → element, reads) with matplotlib "
                        "(simt_tiles.pictures)")
    args = p.parse_args(argv)
    # deferred: loads Numba (backend choice first)
    from .runtime import SIMULATOR

    if not SIMULATOR:
        p.error("the analyzer runs in Numba's CUDA simulator: set NUMBA_ENABLE_CUDASIM=1")
    try:
        report = run(args.variant, ladder=args.ladder, config=args.config, shape=args.shape,
                     dtype=args.dtype, seed=args.seed, intra_warp=args.intra_warp)
    except (ValueError, TypeError) as e:
        p.error(str(e))
    shape = args.shape or DEFAULT_SHAPES[args.ladder]
    print(f"{args.ladder} {args.variant}  config {report.config}  shape {shape}  {args.dtype}")
    print(report.format())
    if args.plot:
        from .pictures import lesson_figure  # deferred: matplotlib, only for --plot

        title = f"{args.ladder} {args.variant}, {report.config}, shape {shape}, {args.dtype}"
        lesson_figure(report, title, banks=BANKS, sector=SECTOR, lanes_per_pass=LANES_PER_PASS).savefig(args.plot)
        print(f"wrote {args.plot}")
    return 1 if report.races else 0


if __name__ == "__main__":
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # no GPU needed: choose before numba loads
    sys.exit(main())
