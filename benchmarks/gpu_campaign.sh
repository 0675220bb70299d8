#!/bin/sh
# The GPU campaign (see benchmarks/gpu_campaign.py and benchmarks/README.md): on a lent GPU
# machine `--part 1`, then `--part 2` if time is left; `--dry-run` shows the plan,
# `--rehearse` runs the whole path here without a GPU.
exec python3 "$(dirname "$0")/gpu_campaign.py" "$@"
