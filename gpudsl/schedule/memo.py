"""Answers about the last procs a schedule made, remembered by identity.

A schedule asks of each result again as the input of the next primitive (its
mapping issues, say).  Procs are immutable, so an answer about one IR object
stays true; :func:`alias` says that two IR objects differ only in what no
answer depends on (the provenance stamped on locations after a primitive).
"""
from __future__ import annotations

_RECENT: list = []  # (ir, {key: answer}); holding the IR keeps its id its own
_SIZE = 16


def _entry(ir) -> dict:
    for q, answers in _RECENT:
        if q is ir:
            return answers
    answers: dict = {}
    _RECENT.append((ir, answers))
    del _RECENT[:-_SIZE]
    return answers


def recall(ir, key, compute):
    """The answer for ``key`` about ``ir``, computed once."""
    answers = _entry(ir)
    if key not in answers:
        answers[key] = compute(ir)
    return answers[key]


def alias(new, old) -> None:
    """``new`` has every answer ``old`` has (the same proc up to provenance)."""
    for q, answers in _RECENT:
        if q is old:
            _entry(new).update(answers)
            return


__all__ = ["recall", "alias"]
