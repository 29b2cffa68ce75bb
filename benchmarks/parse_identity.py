"""Is the HLO model unchanged?  Compares what this checkout's parser builds with another's.

    python benchmarks/parse_identity.py --baseline DIR [--corpus ../shared/corpus] [--show FILE]

Parses every module of the corpus (``hlo/xla``) and every HLO text under ``fixtures/`` with
this checkout and with the one in ``DIR`` (e.g. an export of ``main``: ``git archive main | tar
-x -C DIR``), each in its own interpreter, and also every instruction line of the smaller corpus
modules on its own (``parse_instruction``).  Each input's outcome is dumped structurally: every
public field of every model object, the type of every value that is not a plain ``str``, and
for text that does not parse the error's class, message, line and column.  Prints the inputs
whose dumps differ (``--show FILE`` prints both dumps of one of them) and exits 1 if any do.
Run it with and without ``PROFAN_PURE_PYTHON=1``: the two LALR implementations hand the
builder different token objects.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Modules up to this size also have each instruction line parsed on its own.
_LINE_MODULE_BYTES = 20_000

# Run in a child with a checkout first on sys.path: prints {input: sha256 of its dump}, or the
# dump of one input (argv[3]).
_DUMPER = r"""
import dataclasses, hashlib, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from profan.hlo import parse_instruction, parse_module

def dump(value, out):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(type(value).__name__ + "(")
        for field in dataclasses.fields(value):
            if not field.name.startswith("_"):
                out.append(field.name + "=")
                dump(getattr(value, field.name), out)
                out.append(",")
        out.append(")")
    elif isinstance(value, (list, tuple)):
        out.append(type(value).__name__ + "[")
        for item in value:
            dump(item, out)
            out.append(",")
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for key, item in value.items():
            dump(key, out)
            out.append(":")
            dump(item, out)
            out.append(",")
        out.append("}")
    elif isinstance(value, str) and type(value) is not str:
        out.append(f"<{type(value).__name__}>{value!r}")
    else:
        out.append(repr(value))

def outcome(function, text, **options):
    out = []
    try:
        dump(function(text, **options), out)
    except Exception as error:
        out.append(f"{type(error).__name__}: {error}")
        for name in ("line", "column", "expected"):
            out.append(f" {name}={getattr(error, name, None)!r}")
    return "".join(out)

def inputs(corpus, repo, line_bytes):
    root = Path(corpus) / "hlo" / "xla"
    for path in sorted(root.glob("*.hlo")):
        text = path.read_text(encoding="utf-8", errors="replace")
        yield path.name, lambda t=text, n=path.name: outcome(parse_module, t, file=n)
        if len(text) <= line_bytes:
            for number, line in enumerate(text.splitlines(), 1):
                if "=" in line and "(" in line:
                    yield f"{path.name}:{number}", lambda l=line: outcome(parse_instruction, l)
    for path in sorted((Path(repo) / "fixtures").glob("**/hlo/*.txt")):
        name = str(path.relative_to(repo))
        yield name, lambda t=path.read_text(), n=name: outcome(parse_module, t, file=n)

corpus, wanted, line_bytes = sys.argv[2], sys.argv[3], int(sys.argv[4])
digests = {}
for name, make in inputs(corpus, sys.argv[1], line_bytes):
    if wanted and name != wanted:
        continue
    found = make()
    if wanted:
        print(found)
        break
    digests[name] = hashlib.sha256(found.encode()).hexdigest()
if not wanted:
    print(json.dumps(digests))
"""


def _run(checkout: str, corpus: str, wanted: str = "") -> str:
    found = subprocess.run(
        [sys.executable, "-c", _DUMPER, checkout, corpus, wanted, str(_LINE_MODULE_BYTES)],
        check=True,
        capture_output=True,
        text=True,
        cwd=checkout,
    )
    return found.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the checkout to compare with")
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    parser.add_argument("--show", help="print both dumps of this input")
    args = parser.parse_args()
    # each side parses afresh: no parse cache is read or written
    os.environ["PROFAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="profan-identity-")
    corpus = str(Path(args.corpus).resolve())
    if args.show:
        # one field per line, so the diff points at the field
        theirs, ours = (
            _run(checkout, corpus, args.show).replace(",", ",\n").splitlines(keepends=True)
            for checkout in (args.baseline, str(REPO))
        )
        sys.stdout.writelines(difflib.unified_diff(theirs, ours, "baseline", "this"))
        return 0
    this = json.loads(_run(str(REPO), corpus))
    base = json.loads(_run(args.baseline, corpus))
    differ = sorted(name for name in this.keys() | base.keys() if this.get(name) != base.get(name))
    for name in differ[:50]:
        print(f"differs: {name}")
    backend = "plain lark" if os.environ.get("PROFAN_PURE_PYTHON") else "default backend"
    digest = hashlib.sha256(json.dumps(this, sort_keys=True).encode()).hexdigest()[:12]
    print(
        f"{len(this) - len(differ)}/{len(this)} inputs give the same model ({backend}); "
        f"{len(differ)} differ; digest of all dumps {digest}"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
