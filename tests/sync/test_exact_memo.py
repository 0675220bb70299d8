"""KernelSyncs.exact keeps a True answer per position (it is asked for every pair of
accesses) and asks a False one again; the answers are those of asking afresh."""
from __future__ import annotations

from gpudsl.analysis import sync_counts
from gpudsl.analysis.obligations import Ctx
from gpudsl.analysis.proc_effects import collect
from gpudsl.analysis.sync_counts import kernel_syncs

from .cases import pc_split, split_loop


def _syncs(p):
    eff = collect(p.ir)
    ctx = Ctx(eff, {}, 3000)
    (kernel,) = {a.kernel for a in eff.accesses}
    return kernel_syncs(ctx, kernel), [a.path for a in eff.accesses if a.kernel == kernel]


def test_true_is_kept_and_equal_to_asking_afresh(monkeypatch):
    for p in (pc_split, split_loop):
        ks, paths = _syncs(p)
        fresh, _ = _syncs(p)
        want = [fresh._counts_exact(path, False) for path in paths]
        assert any(want)
        built = []
        real = sync_counts.count_at
        monkeypatch.setattr(sync_counts, "count_at",
                            lambda *a, **k: built.append(1) or real(*a, **k))
        first = [ks._exact_at(path) for path in paths]
        n = len(built)
        again = [ks._exact_at(path) for path in paths]
        assert first == again == want
        assert len(built) == n   # every answer was True: nothing built again
        monkeypatch.setattr(sync_counts, "count_at", real)


def test_false_is_asked_again(monkeypatch):
    ks, paths = _syncs(pc_split)
    asked = []
    monkeypatch.setattr(type(ks), "_counts_exact",
                        lambda self, path, after: asked.append(path) or False)
    assert not ks._exact_at(paths[0]) and not ks._exact_at(paths[0])
    assert len(asked) == 2
