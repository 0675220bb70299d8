#!/bin/sh
# The GPU campaign in one command (see benchmarks/gpu_campaign.py): run on a GPU machine
# from anywhere; results land in benchmarks/results/.  Pass --dry-run to see the plan.
exec python3 "$(dirname "$0")/gpu_campaign.py" "$@"
