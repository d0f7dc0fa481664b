"""How much of the date-ordered NOTES.md (before it became an index) the topic notes hold.

    python benchmarks/lab/notes_coverage.py [COMMIT]     (default 2d517a5, the last date-ordered version)

Counts the numbers and results-file names of the old file that are missing from
``benchmarks/notes/*.md`` (or occur fewer times there), and the old non-blank lines not found
verbatim (a moved script's ``benchmarks/`` prefix aside).  No GPU.
"""
import collections
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = sys.argv[1] if len(sys.argv) > 1 else "2d517a5"
old = subprocess.run(["git", "-C", str(ROOT), "show", f"{BASE}:benchmarks/NOTES.md"], capture_output=True, text=True,
                     check=True).stdout
new = "\n".join(p.read_text() for p in sorted((ROOT / "benchmarks/notes").glob("*.md")))
NUM = r"(?<![\w.])\d[\d,]*(?:\.\d+)?"
FILE = r"[\w{},.*-]+_h200[\w{},.*-]*|[\w-]+\.(?:json|md|csv|log|tsv|txt)\b"
def counts(pat, s):
    return collections.Counter(re.findall(pat, s))
for label, pat in (("numbers", NUM), ("result files", FILE)):
    o, n = counts(pat, old), counts(pat, new)
    miss = sorted(k for k in o if k not in n)
    fewer = sorted(k for k in o if k in n and n[k] < o[k])
    print(f"{label}: {len(o)} distinct in the old notes ({sum(o.values())} occurrences); "
          f"missing from the new notes: {len(miss)} {miss[:30]}; with fewer occurrences: {len(fewer)} {fewer[:30]}")
lines = [l.strip() for l in old.split("\n") if l.strip() and not l.startswith("## ")]
norm = lambda s: re.sub(r"benchmarks/(lab/)?", "", s.lstrip("#").strip())
newl = {norm(l) for l in new.split("\n")}
miss = [l for l in lines if norm(l) not in newl]
print(f"lines: {len(lines)} non-blank old lines (section headings aside); not found verbatim: {len(miss)}")
for l in miss[:20]:
    print("   ", l[:120])
heads = [l[3:] for l in old.split("\n") if l.startswith("## ")]
print(f"old section headings listed in method.md: {sum(h in new for h in heads)} of {len(heads)}",
      [h for h in heads if h not in new])
