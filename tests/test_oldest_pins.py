"""`.ci/oldest` installs the lowest version of every dependency pyproject.toml declares
for ``gpudsl[test,tune]`` (``.ci/oldest-constraints.txt``); a lower bound with no pin
there would be tested at its newest version instead (pytest-xdist was)."""
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")
ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _lower_bounds() -> dict:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in ("test", "tune"):
        reqs += [r for r in meta["optional-dependencies"][extra] if not r.startswith("gpudsl")]
    out = {}
    for r in reqs:
        m = re.search(r">=\s*([0-9][0-9a-z.]*)", r)
        if m:
            out[_name(r)] = m.group(1)
    return out


def _pins() -> dict:
    out = {}
    for line in (ROOT / ".ci" / "oldest-constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[_name(name)] = version.strip()
    return out


def _release(v: str) -> tuple:
    parts = [int(x) for x in re.findall(r"\d+", v)]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def test_every_lower_bound_is_pinned_at_its_version():
    bounds, pins = _lower_bounds(), _pins()
    assert "pytest-xdist" in bounds
    missing = sorted(set(bounds) - set(pins))
    assert not missing, f"no pin in .ci/oldest-constraints.txt for {missing}"
    wrong = {n: (b, pins[n]) for n, b in bounds.items() if _release(b) != _release(pins[n])}
    assert not wrong, f"pins differ from pyproject's lower bounds (bound, pin): {wrong}"


def test_oldest_runs_the_suite_like_ci():
    oldest = (ROOT / ".ci" / "oldest").read_text()
    run = (ROOT / ".ci" / "run").read_text()
    flags = re.search(r"-m pytest (.*)$", run, re.M).group(1)
    assert f"-m pytest {flags}" in oldest
