"""What runs for one elementwise call: the rung and its config, and the call a rung launches.

``vector_add``: the caller's ``variant`` or :data:`BEST_VARIANT` (k02, several elements per
thread, loads first), its ``config`` (None: the target's preset); ``bias_relu``: its one rung.
Either launches as every family's rungs do: ``plan.run(call)`` → ``rung.run(config, call)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...runtime import Plan, Rung, pick_rung
from . import bias_relu as _bias_relu
from . import k01_grid_stride, k02_multi_element

VECTOR_ADD_RUNGS: dict[str, Rung] = {r.name: r for r in (k01_grid_stride.RUNG, k02_multi_element.RUNG)}
#: the rung ``vector_add(variant=None)`` uses
BEST_VARIANT = "k02_multi_element"
RUNGS: dict[str, Rung] = {**VECTOR_ADD_RUNGS, "bias_relu": _bias_relu.RUNG}


class Call(NamedTuple):
    """One elementwise call on device arrays: ``out = f(x, y)`` over ``problem`` (what the
    rung's ``geometry`` takes after the config: ``(n,)`` or ``(m, n)``)."""

    x: Any
    y: Any  #: b of vector_add, bias of bias_relu
    out: Any  #: written
    problem: tuple
    stream: Any = 0

    @property
    def dtype(self):
        return self.x.dtype

    @property
    def args(self) -> tuple:
        return self.x, self.y, self.out


def vector_add_plan(variant=None, config=None) -> Plan:
    """The rung named ``variant`` (None: :data:`BEST_VARIANT`) with ``config`` resolved."""
    rung = pick_rung(VECTOR_ADD_RUNGS, variant, BEST_VARIANT)
    return Plan(rung, rung.resolve_config(config))


def bias_relu_plan(config=None) -> Plan:
    rung = _bias_relu.RUNG
    return Plan(rung, rung.resolve_config(config))
