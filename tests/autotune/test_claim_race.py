"""Regression: two processes claiming one configuration at the same moment both got
"mine" (and both timed it; seen once under load in test_shared_db).  A claim was
created first and given its key in a second write; a claim made in between did not see
it.  The interleaving is forced here: the second claim runs inside the first one's
trial creation."""
from __future__ import annotations

import pytest

pytest.importorskip("optuna")

from gpudsl import autotune  # noqa: E402


def test_concurrent_claims_of_one_key_give_one_owner(tmp_path):
    url = f"sqlite:///{tmp_path / 'claims.sqlite'}"
    a = autotune.Database(url).study("claims", "shapes", "env")
    b = autotune.Database(url).study("claims", "shapes", "env")
    st = a.db.storage
    create = st.create_new_trial
    second, busy = [], []

    def create_then_interleave(study_id, template_trial=None):
        tid = create(study_id, template_trial=template_trial)
        if not busy:  # the other process claims right after this trial exists
            busy.append(True)
            second.append(b.claim("cfg"))
        return tid

    st.create_new_trial = create_then_interleave
    try:
        first = a.claim("cfg")
    finally:
        st.create_new_trial = create
    owners = [r for r in (first, second[0]) if r[0] == "mine"]
    assert len(owners) == 1, (first, second)
