"""torch's convolution parameters — ``stride``, ``padding``, ``dilation``, ``groups`` — checked,
and the output shape they give.

``torch.nn.functional.conv2d(x, w, bias, stride, padding, dilation, groups)``::

    out[n, o, i, j] = bias[o] + Σ_{c < C_in/g} Σ_a Σ_b  w[o, c, a, b] ·
                      xp[n, (o // (C_out/g))·(C_in/g) + c, i·sh + a·dh, j·sw + b·dw]

with ``xp`` = ``x`` zero-padded by ``pad_top``/``pad_left`` (and bottom/right), g = ``groups``:
output channel o reads the input channels of its group only (depthwise: g = C_in).
``OH = (H + pad_top + pad_bottom − dh·(KH − 1) − 1) // sh + 1`` (``OW`` likewise).

``padding``: an int or a pair (the same on both sides of each axis), ``"valid"`` (0) or
``"same"`` (stride 1 only, as torch: total ``dh·(KH − 1)``, ``total // 2`` before and the rest
after — one more after for an odd total, as torch pads).
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

PADDING_STRINGS = ("same", "valid")


#: the largest stride, padding or dilation: the kernels take them as 32-bit ints
MAX_PARAM = 2**31 - 1


def pair(name: str, value, minimum: int, also: str = "") -> tuple[int, int]:
    """An int or a pair of ints ``>= minimum`` (and ``<= MAX_PARAM``) as ``(h, w)``; TypeError/ValueError
    naming ``name`` (``also``: the other forms it takes, for the message)."""
    if type(value) is int and minimum <= value <= MAX_PARAM:  # the common case, cheaply
        return value, value
    expected = f"{name}: expected an int >= {minimum} or a pair of them{also}; got {value!r}"
    vals = value if isinstance(value, (tuple, list)) else (value,)
    if len(vals) not in (1, 2) or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in vals):
        raise TypeError(expected)
    vals = tuple(int(v) for v in vals)
    if min(vals) < minimum:
        raise ValueError(expected)
    if max(vals) > MAX_PARAM:
        raise ValueError(f"{name}: expected ints <= 2**31 - 1 (the kernels take 32-bit ints); got {value!r}")
    return (vals[0], vals[-1])


def groups_of(groups) -> int:
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral):
        raise TypeError(f"groups: expected an int >= 1; got {type(groups).__name__} {groups!r}")
    if groups < 1:
        raise ValueError(f"groups: expected an int >= 1; got {groups}")
    return int(groups)


class Geometry(NamedTuple):
    """One layer's parameters, resolved: stride, dilation, the padding on each side, the output."""

    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    groups: int
    oh: int
    ow: int

    @property
    def fast(self) -> bool:
        """What the tiled rungs take: stride 1, dilation 1, one group, one padding on every side."""
        return (self.stride == (1, 1) and self.dilation == (1, 1) and self.groups == 1
                and self.pad_top == self.pad_bottom == self.pad_left == self.pad_right)


def padding_of(padding, stride: tuple[int, int]) -> tuple[int, int] | str:
    """``(ph, pw)`` or ``"same"``; ``"same"`` with a stride other than 1 is refused, as torch does."""
    if isinstance(padding, str):
        if padding not in PADDING_STRINGS:
            raise ValueError(f"padding: expected an int >= 0 or a pair of them, 'same' or 'valid'; got {padding!r}")
        if padding == "valid":
            return 0, 0
        if stride != (1, 1):
            raise ValueError(f"padding: 'same' is not supported for strided convolutions (stride={stride}), "
                             "as in torch; give the padding as ints")
        return "same"
    return pair("padding", padding, 0, ", 'same' or 'valid'")


def geometry(h: int, w: int, kh: int, kw: int, stride, padding, dilation, groups: int) -> Geometry:
    """The resolved :class:`Geometry` (stride, dilation pairs; padding a pair or ``"same"``); the
    output may be < 1 (the caller refuses that)."""
    (sh, sw), (dh, dw) = stride, dilation
    if padding == "same":
        th, tw = dh * (kh - 1), dw * (kw - 1)
        pads = (th // 2, tw // 2, th - th // 2, tw - tw // 2)
    else:
        pads = (padding[0], padding[1], padding[0], padding[1])
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    return Geometry((sh, sw), (dh, dw), *pads, groups, oh, ow)
