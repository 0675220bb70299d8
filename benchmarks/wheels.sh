#!/usr/bin/env bash
# Run on a machine with a package registry, before a GPU window (issue 26):
#   .whl/        the wheels the lent GPU machines lack (benchmarks/wheels.txt, --no-deps),
#                carried with the tree: run(..., carry=[".whl", ".derived"])
#   .whl-image/  what those machines already hold (benchmarks/wheels-image.txt, with
#                dependencies), for `gpu_campaign.py --rehearse` here; never carried
# Both for CPython 3.12 on manylinux x86_64. Prints the sizes against the 64 MiB the
# device tool carries.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PLAT=()
for n in 17 24 27 28 31 34 35; do PLAT+=(--platform "manylinux_2_${n}_x86_64"); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
PIP=("$PY" -m pip download -q --only-binary=:all: --python-version 3.12
     --implementation cp --abi cp312 --abi abi3 --abi none "${PLAT[@]}")
names() { sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$1"; }

rm -rf .whl && mkdir -p .whl
mapfile -t carried < <(names benchmarks/wheels.txt)
"${PIP[@]}" --no-deps -d .whl "${carried[@]}"
mapfile -t image < <(names benchmarks/wheels-image.txt)
mkdir -p .whl-image
"${PIP[@]}" -d .whl-image "${image[@]}"

# one version of each carried wheel, and exactly the listed ones
"$PY" - "${carried[@]}" <<'PY'
import pathlib, re, sys
want = {re.split(r"[=<>]", a)[0].lower().replace("_", "-") for a in sys.argv[1:]}
have = {}
for w in pathlib.Path(".whl").glob("*.whl"):
    have.setdefault(w.name.split("-")[0].lower().replace("_", "-"), []).append(w.name)
extra, missing = set(have) - want, want - set(have)
twice = {k: v for k, v in have.items() if len(v) > 1}
if extra or missing or twice:
    sys.exit(f"wheels.sh: .whl/ differs from wheels.txt: extra {sorted(extra)}, "
             f"missing {sorted(missing)}, several versions {twice}")
PY

whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | awk '/total$/ {s += $1} END {print s}')
"$PY" -c "import sys; w, t = map(int, sys.argv[1:]); \
print(f'.whl/: {len(open(\"benchmarks/wheels.txt\").read().split(\"==\")) - 1} wheels, '
      f'{w / 2**20:.1f} MiB; tracked tree {t / 2**20:.1f} MiB; together {(w + t) / 2**20:.1f} '
      f'of 64 MiB'); sys.exit(w + t > 64 * 2**20)" "$whl" "$tree"
echo ".whl-image/: $(ls .whl-image/*.whl | wc -l) wheels, $(du -sh .whl-image | cut -f1) (rehearsal only)"
