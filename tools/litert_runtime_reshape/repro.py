"""Wrong answers from LiteRT with XNNPACK: a WHILE body whose RESHAPEs take
shapes computed at run time answers wrong on some fresh interpreters' first
invoke.

Needs only NumPy and LiteRT (`pip install ai-edge-litert numpy`):

    python repro.py              # 300 fresh interpreters per case
    python repro.py --runs 1000

`runtime_reshapes.tflite` is a small recurrent model (a relational memory
core, 3 slots of 8, two attention blocks) as TensorFlow's converter wrote
it: its WHILE body reshapes the state with shapes built at run time (SHAPE
-> STRIDED_SLICE -> PACK(batch, 3, 8) -> RESHAPE). `constant_reshapes.tflite`
is the same file with each such RESHAPE given a constant shape with -1 for
the batch, and nothing else changed. `io.npz` holds an input (batch 1, 50
steps) and the output the model gives in Keras. Each run builds a new
interpreter, invokes `serve` once and compares with that output (1e-4).
"""

import argparse
import pathlib

import numpy as np
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.interpreter import OpResolverType

HERE = pathlib.Path(__file__).parent
RESOLVERS = {
    "XNNPACK on (default)": OpResolverType.AUTO,
    "XNNPACK off": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
}


def wrong_runs(content, sequence, want, runs, resolver):
    """How many of `runs` fresh interpreters answer wrong, and the largest
    error seen."""
    wrong, worst = 0, 0.0
    for _ in range(runs):
        interpreter = Interpreter(model_content=content, experimental_op_resolver_type=resolver)
        got = interpreter.get_signature_runner("serve")(sequence=sequence)["output"]
        error = float(np.abs(got - want).max())
        wrong += error > 1e-4
        worst = max(worst, error)
    return wrong, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=50, help="the first steps of the stored input (1 to 50)")
    args = parser.parse_args()
    data = np.load(HERE / "io.npz")
    sequence = data["sequence"]
    if args.steps != sequence.shape[1]:
        # The stored output is the full input's; a shorter input is judged
        # against the file run without XNNPACK, which no run has shown wrong.
        sequence = sequence[:, : args.steps]
    for name in ("runtime_reshapes.tflite", "constant_reshapes.tflite"):
        content = (HERE / name).read_bytes()
        want = data["output"]
        if sequence.shape[1] != data["sequence"].shape[1]:
            plain = Interpreter(model_content=content, experimental_op_resolver_type=RESOLVERS["XNNPACK off"])
            want = plain.get_signature_runner("serve")(sequence=sequence)["output"]
        for resolver_name, resolver in RESOLVERS.items():
            wrong, worst = wrong_runs(content, sequence, want, args.runs, resolver)
            print(f"{name:<26} {resolver_name:<21} wrong runs {wrong}/{args.runs}, largest error {worst:.3g}")


if __name__ == "__main__":
    main()
