"""The script tokenizer is linear in the line's length (issue 28: each token copied
the rest of the line, a 1 MiB line took 15 s).  Measured as a ratio, not a time: a
line 16 times longer may take about 16 times as long (256 times when quadratic); the
bound leaves room for a loaded machine."""
import time

from gpudsl.graph.script import _tokens


def _line(n):
    return "$1 = InputTensor(x, float32, [" + ", ".join(["4"] * (n // 3)) + "]);"


def _best(line, reps=5):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        _tokens(line, 1)
        out.append(time.perf_counter() - t)
    return min(out)


def test_tokenizing_is_linear_in_the_line_length():
    short, long_ = _line(1 << 14), _line(1 << 18)
    assert len(_tokens(long_, 1)) > 15 * len(_tokens(short, 1))
    ratio = _best(long_) / _best(short)
    assert ratio < 80, ratio
