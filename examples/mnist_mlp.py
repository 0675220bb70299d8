"""The MNIST MLP of HamKaas's lab as a gpudsl graph, checked against numpy.

    python examples/mnist_mlp.py

Random weights (no download); runs on the GPU when there is one, else the emulator.
"""
from __future__ import annotations

import numpy as np

from gpudsl import graph


def build(rng: np.random.Generator, batch: int = 128, hidden: int = 1000):
    w1 = (rng.standard_normal((784, hidden)) * 0.05).astype(np.float32)
    b1 = rng.standard_normal((1, hidden)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, 10)) * 0.05).astype(np.float32)
    b2 = rng.standard_normal((1, 10)).astype(np.float32)
    x = graph.InputTensor("input", "float32", [batch, 28, 28])
    h = (x.reshape([batch, 784]) @ graph.ConstantTensor(w1) + graph.ConstantTensor(b1)).relu()
    y = h @ graph.ConstantTensor(w2) + graph.ConstantTensor(b2)

    def reference(images):
        hh = np.maximum(images.reshape(batch, 784) @ w1 + b1, 0)
        return hh @ w2 + b2
    return y, reference


def main() -> int:
    rng = np.random.default_rng(0)
    y, reference = build(rng)
    print(graph.to_script(y).script)
    model = graph.compile(y)
    print(model.memory)
    images = rng.standard_normal((128, 28, 28)).astype(np.float32)
    out = model.evaluate({"input": images})
    ref = reference(images)
    err = float(np.abs(out - ref).max())
    same = bool((out.argmax(1) == ref.argmax(1)).all())
    print(f"max |gpudsl - numpy| = {err:.2e}; argmax agrees: {same}")
    return 0 if err < 1e-3 and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
