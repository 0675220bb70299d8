"""What the GPU campaign runs, and the limits it must fit (issue 26).

The lent GPU machines give a session 15 minutes of device time in all, machine start
included; one command may run 10 minutes at most; from such a machine only the folder
``$OUT`` comes back (at most 8 files, 16 MiB each, named in letters, digits, '.', '_',
'-'); the working tree that travels, carried wheels included, is at most 64 MiB; a
command line is at most 2,000 characters.  The campaign is therefore two runs:

* part 1 (at most 8 minutes, the first window's one call): offline install, the bench
  rows of the Hopper GEMMs against cuBLAS (they derive and prove their kernels first), a
  smoke test of every stdlib node (and the synchronization kernels) on the GPU against
  numpy, compute-sanitizer memcheck over the stdlib nodes, then ``pytest -m gpu`` in 12
  processes for whatever time the part has left;
* part 2 (at most 4 minutes, if the window has time left): racecheck and synccheck over
  the checker's corpus, memcheck over the derived sm_90a GEMMs on clipped shapes, the
  rest of the bench, LLaMA tokens/s against PyTorch eager, CUDA
  graphs and torch.compile.

Steps are declared here as data, in priority order: this module runs nothing, so CI
checks the plan against the limits (``check_plan``) without a GPU or a network.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent

# the device tool's limits (.library/device/README.md), and the budgets
WINDOW_S = 15 * 60            # device time of a session, machine start included
COMMAND_LIMIT_S = 600         # one command's run
PART_BUDGET_S = {1: 480, 2: 240}   # part 1 within 8 minutes; part 2 in what is left
OUT_FILES = 8
OUT_FILE_BYTES = 16 * 2**20
TREE_BYTES = 64 * 2**20
COMMAND_CHARS = 2000
CARRY_PATHS = 8
OUT_NAME = re.compile(r"^[A-Za-z0-9._-]+$")

# the nodes of part 1's bench step (issue 36): the GEMMs the Hopper kernels are judged
# by, each against cuBLAS in the same run: the derived sm_90a kernels (f16, bf16, TF32;
# the same tiles in row order, the persistent f16 variant, the 256 x 128 tile), then fp32
# SGEMM; they derive
# and prove their kernels on the
# CPU first (~40 s each), so they run alone, before anything else can take their time
GEMM_NODES = ("matmul_f16_sm90", "matmul_bf16_sm90", "matmul_tf32_sm90",
              "matmul_f16_sm90_rows", "matmul_tf32_sm90_rows", "matmul_f16_sm90_persistent",
              "matmul_f16_sm90_tall", "matmul")
# part 2's bench step (issues 26, 34): the ops.matmul GEMMs in the other precisions,
# attention against every SDPA backend, the bandwidth nodes against a device copy of the
# same bytes, the sm_80 half GEMM, then the fp32 kernel variants
BENCH_NODES = ("matmul_tf32", "matmul_f16", "matmul_bf16", "attention",
               "permute2d", "permute3d_021", "permute3d_210", "add", "silu", "rms_norm",
               "sliced_softmax", "matmul_f16_sm80", "matmul_bf16_sm80", "matmul_1stage",
               "matmul_async", "matmul_w64", "matmul_bk16", "matmul_bk16_b1",
               "matmul_tf32_async")
SITE = "/tmp/gpudsl-site"     # where the carried wheels are installed on the machine
WHEELS = ".whl"               # the carried wheels (benchmarks/wheels.sh fills it)

# The exact device call (benchmarks/README.md quotes it; a test keeps them equal).
DEVICE_COMMAND = {
    1: "PYTHONUNBUFFERED=1 python3 benchmarks/gpu_campaign.py --part 1",
    2: "PYTHONUNBUFFERED=1 python3 benchmarks/gpu_campaign.py --part 2",
}
DEVICE_CARRY = [WHEELS]
DEVICE_TIMEOUT_S = {1: 510, 2: 270}   # timeout_s of the device call: budget + slack


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: its name, argv (``{py}``, ``{out}``, ``{site}``, ``{root}``, ``{target}``
    are filled in by ``argv_for``), its time limit, the files it leaves in the output
    folder, and how the rehearsal runs it without a GPU (``rehearse``: ``"same"``, an
    argv replacing it, or ``None``: not run)."""
    name: str
    argv: tuple
    limit_s: int
    files: tuple = ()
    rehearse: object = "same"
    needs: str = ""            # "torch": skipped where PyTorch is missing
    rest: bool = False         # runs until the part's budget is spent (limit_s: at least)

    def argv_for(self, **fill) -> list[str]:
        return [a.format(**fill) for a in self.argv]

    def rehearsal_argv(self, **fill) -> list[str] | None:
        if self.rehearse is None:
            return None
        argv = self.argv if self.rehearse == "same" else self.rehearse
        return [a.format(**fill) for a in argv]


KERNELS = "{root}/benchmarks/campaign_kernels.py"
SANITIZER = "compute-sanitizer"

# every run starts with these: the carried wheels, then what the machine holds
COMMON = [
    Step("install", ("{py}", "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                     "--no-compile", "--no-cache-dir", "--upgrade", "--target", "{site}",
                     "{wheels}"), 15),
    # imports PyTorch for its CUDA/cuBLAS/cuDNN versions (1 to 2 s measured without it)
    Step("environment", ("{py}", "{root}/benchmarks/campaign_env.py"), 20),
]

def _bench(nodes: tuple, limit: int) -> Step:
    return Step("bench", ("{py}", "-m", "gpudsl.cli", "bench", "--nodes", ",".join(nodes),
                          "--out", "{out}/bench.json"), limit, files=("bench.json",),
                rehearse=("{py}", "-m", "gpudsl.cli", "bench", "--target", "emulator",
                          "--nodes", ",".join(nodes), "--out", "{out}/bench.json"),
                needs="torch")


PART1 = COMMON + [
    _bench(GEMM_NODES, 230),
    Step("smoke", ("{py}", KERNELS, "--stdlib", "--sync", "--target", "{target}"), 45),
    Step("sanitizer-memcheck", (SANITIZER, "--tool", "memcheck", "--error-exitcode", "99",
                                "{py}", KERNELS, "--stdlib"), 40,
         rehearse=("{py}", KERNELS, "--stdlib", "--target", "emulator")),
    # in 12 processes (the sm_90a tests derive and prove their kernels on the CPU first);
    # whatever the part has left
    Step("pytest-gpu", ("{py}", "-m", "pytest", "-q", "-m", "gpu", "-rfE", "-n", "12",
                        "--dist", "loadfile", "-p", "no:cacheprovider", "{root}/tests"), 130,
         rest=True),
]

PART2 = COMMON + [
    Step("sanitizer-racecheck", (SANITIZER, "--tool", "racecheck", "--error-exitcode", "99",
                                 "{py}", KERNELS, "--corpus", "--sync", "--controls"), 15,
         rehearse=("{py}", KERNELS, "--corpus", "--controls", "--only", "own_slot",
                   "--target", "emulator")),
    Step("sanitizer-synccheck", (SANITIZER, "--tool", "synccheck", "--error-exitcode", "99",
                                 "{py}", KERNELS, "--corpus", "--sync"), 15,
         rehearse=None),
    # the derived sm_90a GEMMs' clipped edges (guarded stores, TMA stores): each
    # derives and proves its kernel first (about 10 s on the CPU)
    Step("sanitizer-memcheck-sm90", (SANITIZER, "--tool", "memcheck", "--error-exitcode",
                                     "99", "{py}", KERNELS, "--hopper"), 45,
         rehearse=("{py}", KERNELS, "--hopper", "--target", "emulator")),
    _bench(BENCH_NODES, 65),
    # gpudsl against PyTorch eager, CUDA graphs and torch.compile, each in gpudsl's dtype
    Step("llama", ("{py}", "{root}/benchmarks/llama_bench.py", "--out", "{out}"), 65,
         files=("llama.json",), rest=True,
         rehearse=("{py}", "{root}/benchmarks/llama_bench.py", "--quick", "--out", "{out}")),
]

PARTS = {1: PART1, 2: PART2}
# the files the runner itself writes in the output folder
RUNNER_FILES = ("campaign.json", "campaign.log", "sanitizer.json")


def out_files(part: int) -> list[str]:
    names = list(RUNNER_FILES)
    for s in PARTS[part]:
        names += [f for f in s.files if f not in names]
    return names


def tree_bytes(root: pathlib.Path = ROOT) -> int:
    """Bytes of the files that travel to the machine besides the wheels: the tracked
    tree (git ls-files)."""
    import subprocess

    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                               timeout=60, check=True).stdout.split(b"\0")
    except (OSError, subprocess.SubprocessError):
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()
                   and ".git" not in p.parts)
    return sum((root / n.decode()).stat().st_size for n in names
               if n and (root / n.decode()).is_file())


def wheels_bytes(root: pathlib.Path = ROOT) -> int:
    d = root / WHEELS
    return sum(p.stat().st_size for p in d.glob("*.whl")) if d.is_dir() else 0


def check_plan(part: int, wheels: int | None = None, tree: int | None = None) -> list[str]:
    """The ways the plan of ``part`` breaks the limits (empty: it fits)."""
    bad = []
    steps = PARTS[part]
    total = sum(s.limit_s for s in steps)
    if total > PART_BUDGET_S[part]:
        bad.append(f"part {part}: step limits sum to {total} s > {PART_BUDGET_S[part]} s")
    if total > DEVICE_TIMEOUT_S[part] - 20:
        bad.append(f"part {part}: {total} s leaves under 20 s of the device call's "
                   f"{DEVICE_TIMEOUT_S[part]} s")
    if DEVICE_TIMEOUT_S[part] > COMMAND_LIMIT_S:
        bad.append(f"part {part}: the device call's timeout exceeds {COMMAND_LIMIT_S} s")
    if sum(DEVICE_TIMEOUT_S.values()) + 120 > WINDOW_S:
        bad.append("both parts and a 2-minute machine start exceed the 15-minute window")
    if any(s.rest for s in steps[:-1]):
        bad.append(f"part {part}: only the last step may take the rest of the budget")
    for s in steps:
        if s.limit_s > COMMAND_LIMIT_S:
            bad.append(f"{s.name}: limit {s.limit_s} s > {COMMAND_LIMIT_S} s")
    files = out_files(part)
    if len(files) > OUT_FILES:
        bad.append(f"part {part}: {len(files)} output files > {OUT_FILES}")
    bad += [f"output file name {f!r} has characters $OUT does not return" for f in files
            if not OUT_NAME.match(f)]
    if len(DEVICE_COMMAND[part]) > COMMAND_CHARS:
        bad.append(f"part {part}: the device command is over {COMMAND_CHARS} characters")
    if len(DEVICE_CARRY) > CARRY_PATHS:
        bad.append(f"more than {CARRY_PATHS} carried paths")
    if wheels is not None and tree is not None and wheels + tree > TREE_BYTES:
        bad.append(f"wheels {wheels / 2**20:.1f} MiB + tree {tree / 2**20:.1f} MiB > "
                   f"{TREE_BYTES // 2**20} MiB")
    return bad


def describe(part: int) -> str:
    """The plan as text: each step's name, limit and files."""
    lines = [f"part {part}: {sum(s.limit_s for s in PARTS[part])} s of step limits, "
             f"files {', '.join(out_files(part))}"]
    for s in PARTS[part]:
        lines.append(f"  {s.name:22} {s.limit_s:4d} s  " + " ".join(s.argv))
    return "\n".join(lines)
