"""``Model.evaluate`` from several threads (issue 28): the model's one arena was shared
without a lock and emulator launches release the GIL, so threads got each other's
results (24 of 200 wrong with two threads).  Evaluations of one model now take turns."""
import threading

import numpy as np

from gpudsl import graph


def test_threads_evaluating_one_model_each_get_their_own_result():
    x = graph.InputTensor("x", "float32", [64, 64])
    y = graph.InputTensor("y", "float32", [64, 64])
    m = graph.compile(graph.MatMulNode(graph.SumNode(x, y), y))
    rng = np.random.default_rng(0)
    cases = [(rng.integers(-3, 4, (64, 64)).astype(np.float32),
              rng.integers(-3, 4, (64, 64)).astype(np.float32)) for _ in range(8)]
    want = [(a + b) @ b for a, b in cases]
    wrong, errors = [], []

    def worker(k):
        try:
            for _ in range(12):
                a, b = cases[k]
                got = m.evaluate({"x": a, "y": b})
                if not np.array_equal(got, want[k]):
                    wrong.append(k)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong, (errors, len(wrong))
