"""Reading compute-sanitizer's logs of ``campaign_kernels.py`` (the GPU campaign):
each report attributed to the case that was running (the program prints ``@@case KIND
NAME`` before each), and a verdict per tool: a report on a kernel check() proved is a
disagreement with check() (a ``bugs`` entry); racy controls are only counted."""
from __future__ import annotations

import re

_FINDING = re.compile(r"^=+ +(Error|Invalid|Race reported|Barrier error|Warning: .*(hazard|"
                      r"race)|Uninitialized|Program hit)", re.I)
MARK = "@@case"
_RESULT = re.compile(r"^(ok|BAD|SKIP)\s+\S+\s+(.*)$")


def sanitizer_findings(log: str) -> dict:
    """Parse a compute-sanitizer log of campaign_kernels.py: for each case (in the order
    run) its report lines and whether the program said it passed; reports printed before
    the first marker go under ``"(startup)"``."""
    cases: dict = {}
    cur = "(startup)"
    for line in log.splitlines():
        text = line.strip()
        if text.startswith(MARK + " "):
            _, kind, name = text.split(" ", 2)
            cur = name
            cases[cur] = {"kind": kind, "findings": [], "result": None}
        elif cur in cases and (m := _RESULT.match(text)) and \
                (m.group(2) == cur or m.group(2).startswith(cur + ":")):
            cases[cur]["result"] = text
        elif _FINDING.match(text) and "SUMMARY" not in text:
            cases.setdefault(cur, {"kind": "?", "findings": [], "result": None})
            cases[cur]["findings"].append(text.lstrip("= ").strip()[:400])
    return cases


def sanitizer_verdict(tool: str, log: str) -> dict:
    """What one sanitizer step says: per-case findings, bugs (reports on kernels check()
    proved, and cases that failed to run), and for racecheck which controls it saw."""
    cases = sanitizer_findings(log)
    bugs, controls = [], {}
    for name, c in cases.items():
        if c["kind"] == "control":
            controls[name] = bool(c["findings"])
            continue
        if c["findings"]:
            what = {"racecheck": "a shared-memory hazard", "memcheck": "an invalid memory "
                    "access", "synccheck": "a barrier error"}.get(tool, "an error")
            bugs.append({"tool": tool, "case": name, "kind": c["kind"],
                         "summary": f"{tool} reports {what} in {name}, which check() proved "
                                    "safe: a disagreement with check()",
                         "findings": c["findings"][:10]})
        if c["result"] and c["result"].startswith("BAD"):
            bugs.append({"tool": tool, "case": name, "kind": c["kind"],
                         "summary": f"{name} failed under {tool}: {c['result']}"})
    skipped = sorted(n for n, c in cases.items() if (c["result"] or "").startswith("SKIP"))
    out = {"cases_run": sum(1 for n, c in cases.items()
                            if c["kind"] in ("stdlib", "corpus", "sync") and n not in skipped),
           "skipped": skipped,
           "cases_with_findings": sorted(n for n, c in cases.items() if c["findings"]),
           "bugs": bugs}
    if controls:
        out["controls_detected"] = sum(controls.values())
        out["controls_run"] = len(controls)
        out["controls_missed"] = sorted(n for n, seen in controls.items() if not seen)
    return out
