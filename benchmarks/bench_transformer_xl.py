"""Cached Transformer-XL evaluation against recomputing the context.

Dai et al. (2019, Table 9) report per-token evaluation up to 1,874× faster
than a vanilla transformer that recomputes its whole context for every new
token. We measure the same comparison on CPU, batch 1, for a character-
sized model (2 layers, d = 64, 4 heads of 16, d_inner = 256, 128 tokens):

- **cached**: `TransformerXL(segment_len=1, mem_len=C)` and its head, one new
  token per call from the memories of the last C positions (what
  `TransformerXLGenerator` does in token mode): O(C) per token;
- **recompute**: the same weights as `TransformerXL(segment_len=C,
  mem_len=0)` over the last C tokens, for every new token: O(C²) per token;

at contexts C of 512, 2,048 and 8,192 positions, each as a `tf.function`
with and without XLA (`jit_compile`), and the cached step exported to TFLite
(streaming, one token per step, builtins only) and run in LiteRT. The
cached step is timed with its memory empty and full: the work is the same
wherever the stream is, since the memory always has C slots. Medians of
`--repeats` calls after warm-up; tokens per second = 1 / median; the state
is every memory and the memory mask, in bytes.

Results are written to the `bench_transformer_xl` section of
benchmarks/RESULTS.md. Full run (a few minutes on 2 cores):
    python benchmarks/bench_transformer_xl.py
Smoke test:
    python benchmarks/bench_transformer_xl.py --quick --output /tmp/txl.md
"""

import argparse
import importlib.metadata
import os
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from results_file import median_seconds  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import write_section  # noqa: E402

from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.layers import TransformerXL  # noqa: E402

SECTION = "bench_transformer_xl"
VOCABULARY = 128


def language_model(segment_len, mem_len, size):
    layers, heads, head_size, inner = size
    backbone = TransformerXL(layers, heads, head_size, heads * head_size, inner, segment_len=segment_len,
                             mem_len=mem_len, vocabulary_size=VOCABULARY, name="backbone")
    tokens = keras.Input((segment_len,), batch_size=1, dtype="int32", name="tokens")
    states = [keras.Input(shape, batch_size=1, dtype=dtype, name=name)
              for name, shape, dtype in backbone.streaming_state_specs()]
    hidden = backbone(tokens, initial_state=states or None)
    logits = keras.layers.Dense(VOCABULARY, name="head")(hidden)
    return backbone, keras.Model([tokens, *states], logits)


def cached_step_model(backbone, head):
    """tokens (1, 1), states → logits and the new states, in one graph."""

    @tf.function(reduce_retracing=True)
    def step(tokens, states):
        hidden, new_states = backbone.streaming_step(tokens, states)
        return head(hidden), new_states

    return step


def measure(context, size, args):
    rng = np.random.default_rng(0)
    backbone, cached = language_model(1, context, size)
    head = cached.get_layer("head")
    _, full = language_model(context, 0, size)
    full.set_weights(cached.get_weights())
    token = tf.constant(rng.integers(0, VOCABULARY, (1, 1)), tf.int32)
    window = tf.constant(rng.integers(0, VOCABULARY, (1, context)), tf.int32)
    empty = [tf.constant(s) for s in backbone.get_initial_state(1)]
    filled = [tf.constant(rng.normal(size=s.shape).astype("float32")) for s in empty[:-1]]
    filled.append(tf.ones_like(empty[-1]))
    state_bytes = sum(int(np.prod(s.shape)) * s.dtype.size for s in empty)
    row = {"context": context, "state_bytes": state_bytes}
    for jit in (False, True):
        step = cached_step_model(backbone, head)
        recompute = tf.function(lambda x: full(x)[:, -1], jit_compile=jit)
        if jit:
            step = tf.function(step.python_function, jit_compile=True)
        label = "xla" if jit else "graph"
        for name, states in (("empty", empty), ("full", filled)):
            row[f"cached_{label}_{name}"] = median_seconds(
                lambda f=step, s=states: [t.numpy() for t in tf.nest.flatten(f(token, s))], args.repeats, 2)
        repeats = max(3, args.repeats // 10) if context > 2048 else args.repeats // 2 or 1
        row[f"recompute_{label}"] = median_seconds(lambda f=recompute: f(window).numpy(), repeats, 1)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "step.tflite")
        tokens = keras.Input((1,), dtype="int32", name="tokens")
        export_tflite(keras.Model(tokens, head(backbone(tokens))), path, streaming=True)
        from ai_edge_litert.interpreter import Interpreter

        interpreter = Interpreter(model_path=path)
        runner = interpreter.get_signature_runner("step")
        names = [f"backbone_{name}" for name, _, _ in backbone.streaming_state_specs()]
        feeds = {"tokens": token.numpy(), **{n: s.numpy() for n, s in zip(names, filled)}}
        row["cached_tflite_full"] = median_seconds(lambda: runner(**feeds), args.repeats, 2)
    return row


def render(args, rows, size):
    layers, heads, head_size, inner = size
    lines = section_header("Transformer-XL: cached evaluation against recomputing the context", args.quick,
                           {"ai-edge-litert": importlib.metadata.version("ai-edge-litert")})
    lines += [
        f"- Model: {layers} layers, d = {heads * head_size}, {heads} heads of {head_size}, d_inner = {inner}, "
        f"{VOCABULARY} tokens; batch 1; one new token per call; medians of {args.repeats} calls "
        "(recompute at 8,192: fewer)",
        "",
        "| context C | state (bytes) | cached, graph: empty / full memory (ms) | cached, XLA (ms) "
        "| cached, LiteRT (ms) | recompute, graph (ms) | recompute, XLA (ms) | speed-up, graph | speed-up, XLA "
        "| tokens/s cached (XLA) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = {k: v * 1e3 for k, v in r.items() if isinstance(v, float)}
        lines.append(
            f"| {r['context']:,} | {r['state_bytes']:,} | {ms['cached_graph_empty']:.2f} / "
            f"{ms['cached_graph_full']:.2f} | {ms['cached_xla_full']:.2f} | {ms['cached_tflite_full']:.2f} "
            f"| {ms['recompute_graph']:.1f} | {ms['recompute_xla']:.1f} "
            f"| {r['recompute_graph'] / r['cached_graph_full']:.0f}× "
            f"| {r['recompute_xla'] / r['cached_xla_full']:.0f}× "
            f"| {1 / r['cached_xla_full']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "tiny contexts and sizes, a few seconds")
    parser.add_argument("--repeats", type=int, default=30)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    contexts, size = ((16, 32), (1, 2, 4, 16)) if args.quick else ((512, 2048, 8192), (2, 4, 16, 256))
    if args.quick:
        args.repeats = min(args.repeats, 4)
    rows = [measure(c, size, args) for c in contexts]
    section = write_section(args.output, SECTION, render(args, rows, size))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
