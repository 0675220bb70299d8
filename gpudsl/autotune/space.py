"""The search space of an autotuning run: named finite domains and ``where`` constraints
(docs/autotuning.md).  A configuration is a ``Config``, a mapping with attribute access
(``c.tile_m``)."""
from __future__ import annotations

import itertools
import json
import random
from typing import Any, Callable, Iterator

from ..errors import Error


class Config(dict):
    """One point of a ``Space``: ``c["bm"]`` and ``c.bm`` both work."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"configuration has no parameter {name!r} "
                                 f"(it has {', '.join(self) or 'none'})") from None

    def key(self) -> str:
        """Canonical JSON text (sorted names): the configuration's identity in the database."""
        return json.dumps(self, sort_keys=True, default=_jsonable)

    def __hash__(self):  # configurations are used as keys; never mutate one after use
        return hash(self.key())


def _jsonable(v):
    if hasattr(v, "item"):
        return v.item()
    raise TypeError(f"parameter value {v!r} is not a number, string or bool")


class Space:
    """``Space(bm=[64, 128], bk=[8, 16], where=lambda c: c.bm >= c.bk)``.

    Domains are finite lists, enumerated in the order given (names in the order given);
    ``where`` is a predicate or a list of predicates a configuration must satisfy."""

    def __init__(self, where: Callable | list | tuple | None = None, **domains):
        if not domains:
            raise Error("autotune.Space needs at least one parameter", None,
                        "name each parameter with its values: Space(bm=[64, 128])")
        self.domains: dict[str, list] = {}
        for name, vals in domains.items():
            if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
                vals = [vals]
            vals = list(vals)
            if not vals:
                raise Error(f"autotune.Space: parameter {name!r} has no values")
            if len(set(map(repr, vals))) != len(vals):
                raise Error(f"autotune.Space: parameter {name!r} repeats a value: {vals}")
            self.domains[name] = vals
        if where is None:
            self.where: tuple = ()
        elif callable(where):
            self.where = (where,)
        else:
            self.where = tuple(where)

    @property
    def names(self) -> list[str]:
        return list(self.domains)

    def allows(self, c: Config) -> bool:
        """Whether ``c`` lies in the domains and satisfies every ``where``."""
        if set(c) != set(self.domains):
            return False
        if any(c[n] not in vals for n, vals in self.domains.items()):
            return False
        return all(bool(w(c)) for w in self.where)

    def __iter__(self) -> Iterator[Config]:
        """Every configuration satisfying the constraints, in grid order."""
        names = self.names
        for vals in itertools.product(*(self.domains[n] for n in names)):
            c = Config(zip(names, vals))
            if all(bool(w(c)) for w in self.where):
                yield c

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def grid(self) -> list[Config]:
        return list(self)

    def shuffled(self, seed: int) -> list[Config]:
        """The valid configurations in a random order fixed by ``seed``."""
        out = self.grid()
        random.Random(seed).shuffle(out)
        return out

    def config(self, **values) -> Config:
        """A configuration of this space, checked: ``space.config(bm=64, ...)``."""
        c = Config(values)
        if not self.allows(c):
            raise Error(f"autotune: {dict(c)} is not a configuration of this space "
                        f"(domains {self.domains})")
        return c

    def __repr__(self):
        return "Space(" + ", ".join(f"{n}={v}" for n, v in self.domains.items()) + \
            (f", where=<{len(self.where)} constraint(s)>" if self.where else "") + ")"


class Budget:
    """Stop after ``trials`` configurations or ``seconds`` of wall time, whichever first
    (``None``: no limit)."""

    def __init__(self, trials: int | None = None, seconds: float | None = None):
        self.trials = trials
        self.seconds = seconds

    def __repr__(self):
        return f"Budget(trials={self.trials}, seconds={self.seconds})"
