"""The ``gpudsl`` command line: demo, check (``check_command.py``), cuda (``cuda_command.py``), perf
(``perf_command.py``), run (``run_command.py``, graph scripts), tune (``tune_command.py``), bench
(``gpudsl/bench/``).  ``DESCRIPTION`` is what ``gpudsl --help`` prints: plain text."""
from __future__ import annotations

import argparse
import sys


DESCRIPTION = ("gpudsl: write GPU kernels as Python procs, prove them race-free and in "
               "bounds, schedule them, and run them on a GPU or the CPU emulator. "
               "Run 'gpudsl COMMAND --help' for a command's options.")


def _bindings(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"gpudsl: --bind takes NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise SystemExit(f"gpudsl: --bind {name}: {value!r} is not an integer") from None
    return out


def main(argv: list[str] | None = None) -> int:
    from ..errors import Error

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # its own parser (argparse's REMAINDER drops leading options)
        from ..bench import main as bench_main

        try:
            return bench_main(argv[1:])
        except KeyboardInterrupt:
            print("gpudsl bench: interrupted", file=sys.stderr)
            return 130
    ns = _parser().parse_args(argv)
    try:
        if ns.cmd in COMMANDS:
            return COMMANDS[ns.cmd][1](ns)
    except Error as e:
        print(f"gpudsl: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # Ctrl-C: one line, the shell's status for SIGINT
        print(f"gpudsl {ns.cmd}: interrupted{INTERRUPTED.get(ns.cmd, '')}", file=sys.stderr)
        return 130
    return 2


# what an interrupted command leaves behind, said after "interrupted"
INTERRUPTED = {"tune": ": the configurations measured so far are kept in the tuning "
                       "database; the same command resumes from them"}


def _parser() -> argparse.ArgumentParser:
    """The command line: ``--version`` and a subcommand of :data:`COMMANDS` each."""
    from ..version import __version__

    ap = argparse.ArgumentParser(prog="gpudsl", description=DESCRIPTION)
    ap.add_argument("--version", action="version", version=f"gpudsl {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for add_parser, _ in COMMANDS.values():
        add_parser(sub)
    return ap


def _proc_parser(sub, name: str, help: str):
    """A subcommand on ``FILE[::PROC]`` with ``--bind NAME=VALUE`` options."""
    c = sub.add_parser(name, help=help)
    c.add_argument("procs", metavar="FILE[::PROC]",
                   help="a Python file, or one proc of it (FILE::NAME)")
    c.add_argument("--bind", action="append", default=[], metavar="NAME=VALUE")
    return c


# ---------------------------------------------------------------- each subcommand: its
# parser and what it runs


def _demo_parser(sub):
    sub.add_parser("demo", help="run the main example end to end")


def _demo(ns) -> int:
    from ..demo import run

    return run()


def _check_parser(sub):
    _proc_parser(sub, "check", "check the procs of a file and compare its @instr templates "
                 "with their bodies: gpudsl check FILE[::PROC]")


def _check(ns) -> int:
    from .check_command import run_check

    return run_check(ns.procs, _bindings(ns.bind))


def _cuda_parser(sub):
    _proc_parser(sub, "cuda", "print the CUDA C of a proc: gpudsl cuda FILE::PROC")


def _cuda(ns) -> int:
    from .cuda_command import run_cuda

    return run_cuda(ns.procs, _bindings(ns.bind))


def _run_parser(sub):
    r = sub.add_parser("run", help="run a HamKaas graph script: gpudsl run SCRIPT "
                       "--input name=file.npy --constants dir/")
    r.add_argument("script")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    r.add_argument("--constants", default=None, metavar="DIR",
                   help="a folder holding NAME.npy for each ConstantTensor")
    r.add_argument("--output", default=None, metavar="FILE.npy")


def _run(ns) -> int:
    from .run_command import run_script

    return run_script(ns.script, ns.input, ns.constants, ns.output)


def _perf_parser(sub):
    f = _proc_parser(sub, "perf", "the performance report of a proc: gpudsl perf FILE::PROC "
                     "--bind n=4096 [--device H100] [--sass [--arch sm_90]]")
    f.add_argument("--device", default="H100", help="H100 (default), H200 or A100")
    f.add_argument("--sass", action="store_true",
                   help="also the machine-code report (needs pip install 'gpudsl[sass]')")
    f.add_argument("--arch", default=None, help="the sm target of --sass (default: the "
                   "device's, sm_90 for H100)")


def _perf(ns) -> int:
    from .perf_command import run_perf

    return run_perf(ns.procs, _bindings(ns.bind), ns.device, ns.sass, ns.arch)


def _bench_parser(sub):
    b = sub.add_parser("bench", help="run the standard-library benchmarks")
    b.add_argument("args", nargs=argparse.REMAINDER)


def _bench(ns) -> int:
    from ..bench import main as bench_main

    return bench_main(ns.args)


def _tune_parser(sub):
    t = sub.add_parser("tune", help="tune a standard-library node: gpudsl tune matmul "
                       "--shape 4096x4096 --shape 4096x4096")
    from .tune_command import tunable

    t.add_argument("node", choices=tunable())
    t.add_argument("--shape", action="append", required=True, metavar="DxD[xD]",
                   help="an operand's shape (once per operand)")
    t.add_argument("--backend", choices=["cuda", "emulator"], default=None,
                   help="where the candidates run; default: cuda when a GPU is present, "
                   "else the emulator (a dry run)")
    t.add_argument("--target", choices=["cuda", "emulator"], default=None,
                   help=argparse.SUPPRESS)  # the old name of --backend
    t.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32",
                   help="matmul: the operands' dtype; float16/bfloat16 tune the half GEMM "
                   "ops.matmul runs on this device (sm_90a: the wgmma kernel, else sm_80's)")
    t.add_argument("--strategy", choices=["grid", "random", "tpe"], default="grid")
    t.add_argument("--trials", type=int, default=None)
    t.add_argument("--seconds", type=float, default=None)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--db", default=None, help="database path or URL (sqlite:///..., postgresql://...: a "
                   "study shared by several machines)")
    t.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="restrict a parameter's values (e.g. bm=64,128)")
    t.add_argument("--perm", default=None, metavar="P0,P1,..",
                   help="permute: the axes' order (default: reversed)")
    t.add_argument("--begin", type=int, default=0, help="slice, replace_slice: first row")
    t.add_argument("--end", type=int, default=None,
                   help="slice, replace_slice: end row (default: half the rows)")
    t.add_argument("--reps", type=int, default=10)
    t.add_argument("--export", default=None, metavar="FILE.json",
                   help="write the node's records and winners as JSON")


def _tune(ns) -> int:
    from ..errors import Error
    from .tune_command import run_tune

    try:
        return run_tune(ns)
    except (Error, KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # noqa: BLE001 - the store, Optuna, SQLAlchemy, OS
        print(f"gpudsl tune: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
        return 1


# name: (adds its parser to the subparsers, runs it on the parsed arguments); in the
# order ``gpudsl --help`` lists them
COMMANDS = {
    "demo": (_demo_parser, _demo),
    "check": (_check_parser, _check),
    "cuda": (_cuda_parser, _cuda),
    "run": (_run_parser, _run),
    "perf": (_perf_parser, _perf),
    "bench": (_bench_parser, _bench),
    "tune": (_tune_parser, _tune),
}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
