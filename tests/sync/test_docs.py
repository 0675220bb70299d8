"""The code blocks of docs/language.md's section on synchronization (docs/language.md (synchronization)) run,
in order, as one script (as the README's first snippet does)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def test_synchronization_section_runs(tmp_path):
    text = (ROOT / "docs" / "language.md").read_text()
    section = text.split("## Synchronization beyond the block barrier", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 3  # each also runs alone as a doc test (conftest.py)
    script = tmp_path / "sync_docs.py"
    future = "from __future__ import annotations\n"
    script.write_text(future + "\n".join(b.replace(future, "") for b in blocks))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check(pipeline): ok" in r.stdout
    assert "race" in r.stdout
