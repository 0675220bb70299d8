"""No two modules under gpudsl/ share a file name (issue 41): a name says what a file is
about without its folder.  The repeats allowed are listed with their reason."""
import collections
import pathlib

import gpudsl

ROOT = pathlib.Path(gpudsl.__file__).resolve().parent

ALLOWED = {
    '__init__.py': "a package's own file (Python's name)",
    '__main__.py': "python -m's entry (Python's name)",
    'ops.py': 'public module paths users import: gpudsl.ops (the ops API) and gpudsl.torch.ops (the same ops as PyTorch operators, as torch.ops)',
}


def test_no_repeated_file_names():
    seen = collections.defaultdict(list)
    for p in ROOT.rglob("*.py"):
        seen[p.name].append(str(p.relative_to(ROOT)))
    repeats = {n: sorted(ps) for n, ps in seen.items() if len(ps) > 1 and n not in ALLOWED}
    assert not repeats, f"file names that repeat under gpudsl/: {repeats}"


def test_allowed_repeats_are_real():
    names = {p.name for p in ROOT.rglob("*.py")}
    assert set(ALLOWED) <= names, set(ALLOWED) - names
