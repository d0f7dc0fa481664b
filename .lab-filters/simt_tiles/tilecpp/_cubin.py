"""What a tile cubin says about its kernels, read without a GPU: the parameter layout the
compiler chose (offset and size of each argument) and the threads per block it requires.

A cubin is an ELF file; each kernel ``K`` has a section ``.nv.info.K`` holding a list of
attributes (``EIATTR_*``): a format byte, an attribute byte, then either a 2-byte value or a
2-byte length and that many bytes.  Two of them matter here:

* ``EIATTR_KPARAM_INFO`` (0x17; 0x45 in kernels that use the TMA, whose parameter bank
  also holds the tensor maps tileiras hoisted: ``param_bytes`` is then larger than the
  parameters), one per parameter: ordinal, byte offset and size.  The
  tests compare them with :data:`simt_tiles.tilecpp._launch.SIGNATURES`, so a ``.cu`` edit
  that changes a signature fails on the CPU instead of corrupting a launch.
* ``EIATTR_REQNTID`` (0x10): the (x, y, z) threads per block that ``tileiras`` compiled the
  block for.  Tile kernels are nevertheless launched with a block of (1, 1, 1) — the launch
  rule of CUDA Tile (``_launch``) — and the block gets these threads.
"""

from __future__ import annotations

import dataclasses
import struct

__all__ = ["KernelInfo", "Param", "kernels"]

EIATTR_REQNTID = 0x10
EIATTR_KPARAM_INFO = 0x17
EIATTR_KPARAM_INFO_V2 = 0x45  # what tileiras writes for kernels whose tensor maps it hoists
EIATTR_CBANK_PARAM_SIZE = 0x19
_EIFMT_SVAL = 4  # the only format with a length and a payload; the others carry 2 bytes


@dataclasses.dataclass(frozen=True)
class Param:
    ordinal: int
    offset: int
    size: int


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    name: str
    params: tuple[Param, ...]  # by ordinal
    param_bytes: int | None  # the parameter bank's size (hoisted tensor maps included)
    reqntid: tuple[int, int, int] | None


def _sections(elf: bytes) -> dict[str, bytes]:
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("cubin: expected a 64-bit ELF file (a CUDA cubin)")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = elf[strtab_off:strtab_off + strtab_size]
    out = {}
    for name_off, _type, _flags, _addr, off, size, *_ in headers:
        name = strtab[name_off:strtab.index(b"\0", name_off)].decode()
        out[name] = elf[off:off + size]
    return out


def _attributes(info: bytes):
    pos = 0
    while pos + 4 <= len(info):
        fmt, attr = info[pos], info[pos + 1]
        if fmt == _EIFMT_SVAL:
            size, = struct.unpack_from("<H", info, pos + 2)
            yield attr, info[pos + 4:pos + 4 + size]
            pos += 4 + size
        else:
            yield attr, info[pos + 2:pos + 4]
            pos += 4


def kernels(elf: bytes) -> dict[str, KernelInfo]:
    """Every kernel of a cubin, by name."""
    out = {}
    for section, info in _sections(elf).items():
        if not section.startswith(".nv.info."):
            continue
        name = section[len(".nv.info."):]
        params, param_bytes, reqntid = [], None, None
        for attr, value in _attributes(info):
            if attr == EIATTR_KPARAM_INFO:
                _index, ordinal, offset, flags = struct.unpack("<IHHI", value)
                params.append(Param(ordinal, offset, (flags >> 18) & 0x3FFF))
            elif attr == EIATTR_KPARAM_INFO_V2:
                _index, ordinal, offset, flags = struct.unpack("<IHHI", value)
                params.append(Param(ordinal, offset, flags & 0xFFFF))
            elif attr == EIATTR_CBANK_PARAM_SIZE:
                param_bytes, = struct.unpack("<H", value)
            elif attr == EIATTR_REQNTID:
                reqntid = struct.unpack("<III", value)
        out[name] = KernelInfo(name, tuple(sorted(params, key=lambda p: p.ordinal)), param_bytes, reqntid)
    return out
