"""A plain-text table (no dependency): the CLI, demo and benchmarks print these."""

from __future__ import annotations


def render(head: list[str], rows: list[list[str]]) -> str:
    cols = list(zip(head, *rows)) if rows else [(h,) for h in head]
    widths = [max(len(str(c)) for c in col) for col in cols]
    line = "  ".join("-" * w for w in widths)
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), line, *(fmt(r) for r in rows)])


def markdown(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
