"""The segment cache's step against Transformer-XL's FIFO memory.

One segment per call, batch 1, a model of 2 layers, d = 64, 4 heads of 16,
d_inner = 256, 128 tokens, every state full. For each segment length L,
cache size N (segments) and recall k:

- **cache**: `SegmentCacheTransformer(num_slots=N, top_k=k)`, causal query,
  dense summary: it stores N·L positions per layer and attends to k·L of
  them plus the segment;
- **FIFO, same store**: `TransformerXL(mem_len=N·L)`: stores as much and
  attends to all of it;
- **FIFO, same attention**: `TransformerXL(mem_len=k·L)`: attends to as
  many positions as the cache, stores k·L.

Each step is a `tf.function`, with and without XLA (`jit_compile`), and the
cache's step also exported to TFLite (streaming, one segment per step,
builtins only) and run in LiteRT. What retrieval costs is the cache's time
over the FIFO of the same attention. Medians of `--repeats` calls after
warm-up; state in bytes (float32).

Results go to the `bench_segment_cache` section of benchmarks/RESULTS.md.
Full run (a few minutes on 2 cores):
    python benchmarks/bench_segment_cache.py
Smoke test:
    python benchmarks/bench_segment_cache.py --quick --output /tmp/cache.md
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
from keras_relrec.layers import SegmentCacheTransformer  # noqa: E402
from keras_relrec.layers import TransformerXL  # noqa: E402

SECTION = "bench_segment_cache"
VOCABULARY = 128


def backbone(kind, length, slots, k, size):
    layers, heads, head_size, inner = size
    common = dict(num_layers=layers, num_heads=heads, head_size=head_size, hidden_dim=heads * head_size,
                  intermediate_dim=inner, segment_len=length, vocabulary_size=VOCABULARY, name="backbone")
    if kind == "cache":
        return SegmentCacheTransformer(num_slots=slots, top_k=k, **common)
    return TransformerXL(mem_len=(slots if kind == "fifo_store" else k) * length, **common)


def full_states(layer, rng):
    """Every state as in a long stream: values random, masks all ones."""
    states = []
    for name, shape, dtype in layer.streaming_state_specs():
        value = np.ones((1,) + shape, "float32") if "mask" in name else rng.normal(size=(1,) + shape)
        states.append(tf.constant(value.astype(dtype)))
    return states


def measure(length, slots, k, size, args):
    rng = np.random.default_rng(0)
    tokens = tf.constant(rng.integers(0, VOCABULARY, (1, length)), tf.int32)
    row = {"L": length, "N": slots, "k": k}
    for kind in ("cache", "fifo_store", "fifo_attention"):
        layer = backbone(kind, length, slots, k, size)
        head = keras.layers.Dense(VOCABULARY)
        head(layer(tokens))
        states = full_states(layer, rng)
        row[f"{kind}_bytes"] = sum(int(np.prod(s.shape)) * s.dtype.size for s in states)

        def step(tokens, states, layer=layer, head=head):
            hidden, new_states = layer.streaming_step(tokens, states)
            return head(hidden), new_states

        for jit in (False, True):
            function = tf.function(step, jit_compile=jit)
            row[f"{kind}_{'xla' if jit else 'graph'}"] = median_seconds(
                lambda f=function, s=states: [t.numpy() for t in tf.nest.flatten(f(tokens, s))], args.repeats, 2)
        if kind == "cache":
            row["cache_tflite"] = litert_step(layer, head, tokens, states, length, args)
    return row


def litert_step(layer, head, tokens, states, length, args):
    from ai_edge_litert.interpreter import Interpreter

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "step.tflite")
        inputs = keras.Input((length,), dtype="int32", name="tokens")
        export_tflite(keras.Model(inputs, head(layer(inputs))), path, streaming=True)
        runner = Interpreter(model_path=path).get_signature_runner("step")
        names = [f"backbone_{name}" for name, _, _ in layer.streaming_state_specs()]
        feeds = {"tokens": tokens.numpy(), **{n: s.numpy() for n, s in zip(names, states)}}
        return median_seconds(lambda: runner(**feeds), args.repeats, 2)


def render(args, rows, size):
    layers, heads, head_size, inner = size
    lines = section_header("Segment cache: a step against Transformer-XL's FIFO memory", args.quick,
                           {"ai-edge-litert": importlib.metadata.version("ai-edge-litert")})
    lines += [
        f"- Model: {layers} layers, d = {heads * head_size}, {heads} heads of {head_size}, d_inner = {inner}, "
        f"{VOCABULARY} tokens; batch 1; one segment of L tokens per call, every state full; medians of "
        f"{args.repeats} calls; cache: causal query, dense summary",
        "- FIFO, same store: `TransformerXL(mem_len=N·L)`; FIFO, same attention: `TransformerXL(mem_len=k·L)`; "
        "retrieval's cost: cache ÷ FIFO of the same attention (XLA)",
        "",
        "| L | N | k | cache, graph / XLA / LiteRT (ms) | FIFO same store, graph / XLA (ms) "
        "| FIFO same attention, graph / XLA (ms) | cache ÷ same store (XLA) | retrieval's cost (XLA) "
        "| state: cache / same store / same attention (KiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = {key: value * 1e3 for key, value in r.items() if isinstance(value, float)}
        kib = {key: r[f"{key}_bytes"] / 1024 for key in ("cache", "fifo_store", "fifo_attention")}
        lines.append(
            f"| {r['L']} | {r['N']} | {r['k']} "
            f"| {ms['cache_graph']:.2f} / {ms['cache_xla']:.2f} / {ms['cache_tflite']:.2f} "
            f"| {ms['fifo_store_graph']:.2f} / {ms['fifo_store_xla']:.2f} "
            f"| {ms['fifo_attention_graph']:.2f} / {ms['fifo_attention_xla']:.2f} "
            f"| {r['cache_xla'] / r['fifo_store_xla']:.2f}× | {r['cache_xla'] / r['fifo_attention_xla']:.2f}× "
            f"| {kib['cache']:,.0f} / {kib['fifo_store']:,.0f} / {kib['fifo_attention']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "tiny sizes, a few seconds")
    parser.add_argument("--repeats", type=int, default=30)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    if args.quick:
        grid, size = [(4, 3, 1), (4, 3, 2)], (1, 2, 4, 16)
        args.repeats = min(args.repeats, 4)
    else:
        grid = [(16, slots, k) for slots in (8, 32) for k in (1, 4)] + [(64, slots, 2) for slots in (8, 32)]
        size = (2, 4, 16, 256)
    rows = [measure(length, slots, k, size, args) for length, slots, k in grid]
    section = write_section(args.output, SECTION, render(args, rows, size))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
