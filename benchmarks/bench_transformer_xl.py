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

A second table sets the exported step against the TF graph step, for that
model and a larger one (6 layers, d = 256, 8 heads of 32, d_inner =
1,024) at 512 and 2,048 positions, every variant timed in turn in one
round robin (a slow spell of the shared machine hits all alike), with a
full memory, each file in a fresh LiteRT interpreter with its default
delegates (XNNPACK), as a device runs it: the file exported at batch 1
(every shape static), the default export (dynamic batch), and the batch-1
file with its subgraphs in the converter's order (`chunk_length` first),
as `export_tflite` wrote it before `subgraph_order`: LiteRT then delegated
none of them.

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
from results_file import rewarmed  # noqa: E402
from results_file import round_robin  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import time_once  # noqa: E402
from results_file import write_section  # noqa: E402

from keras_relrec.export import export_tflite  # noqa: E402
from keras_relrec.export.tflite import flatbuffer  # noqa: E402
from keras_relrec.layers import TransformerXL  # noqa: E402

SECTION = "bench_transformer_xl"
VOCABULARY = 128
# (layers, heads, head size, d_inner)
SMALL = (2, 4, 16, 256)
LARGE = (6, 8, 32, 1024)


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


def stream_inputs(backbone, rng):
    """A token, the empty states and full ones (random memories)."""
    token = tf.constant(rng.integers(0, VOCABULARY, (1, 1)), tf.int32)
    empty = [tf.constant(s) for s in backbone.get_initial_state(1)]
    filled = [tf.constant(rng.normal(size=s.shape).astype("float32")) for s in empty[:-1]]
    filled.append(tf.ones_like(empty[-1]))
    return token, empty, filled


def converter_order(content):
    """The file with its subgraphs as the converter orders them, by
    signature name (`chunk_length` first): what `export_tflite` wrote
    before it put `step` first."""
    model = flatbuffer.read(content)
    signatures = {s.subgraphIndex: s.signatureKey for s in model.signatureDefs}
    order = sorted(signatures, key=signatures.get) + [k for k in range(len(model.subgraphs)) if k not in signatures]
    index = {old: new for new, old in enumerate(order)}
    model.subgraphs = [model.subgraphs[k] for k in order]
    for signature in model.signatureDefs:
        signature.subgraphIndex = index[signature.subgraphIndex]
    for subgraph in model.subgraphs:
        for op in subgraph.operators or []:
            if type(op.builtinOptions).__name__ == "WhileOptionsT":
                op.builtinOptions.condSubgraphIndex = index[op.builtinOptions.condSubgraphIndex]
                op.builtinOptions.bodySubgraphIndex = index[op.builtinOptions.bodySubgraphIndex]
    return flatbuffer.write(model, len(content))


def litert_runner(content, backbone, token, states):
    """The file's `step` in a fresh interpreter (default delegates), fed a
    token and the states; checked against nothing here (tests do)."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=content).get_signature_runner("step")
    names = [f"backbone_{name}" for name, _, _ in backbone.streaming_state_specs()]
    feeds = {"tokens": token.numpy(), **{n: s.numpy() for n, s in zip(names, states)}}
    return lambda: runner(**feeds)


def export_step(backbone, head, batch_size):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "step.tflite")
        tokens = keras.Input((1,), dtype="int32", name="tokens")
        export_tflite(keras.Model(tokens, head(backbone(tokens))), path, streaming=True, batch_size=batch_size)
        with open(path, "rb") as f:
            return f.read()


def measure(context, size, args):
    rng = np.random.default_rng(0)
    backbone, cached = language_model(1, context, size)
    head = cached.get_layer("head")
    _, full = language_model(context, 0, size)
    full.set_weights(cached.get_weights())
    token, empty, filled = stream_inputs(backbone, rng)
    window = tf.constant(rng.integers(0, VOCABULARY, (1, context)), tf.int32)
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
    runner = litert_runner(export_step(backbone, head, None), backbone, token, filled)
    row["cached_tflite_full"] = median_seconds(runner, args.repeats, 2)
    return row


DEVICE_VARIANTS = ("graph", "xla", "litert_batch_1", "litert_dynamic_batch", "litert_converter_order")


def measure_device_step(context, size, args):
    """The cached step (full memory) as a TF graph, under XLA and as three
    LiteRT files, timed in one round robin: {variant: median seconds}."""
    rng = np.random.default_rng(0)
    backbone, cached = language_model(1, context, size)
    head = cached.get_layer("head")
    token, _, filled = stream_inputs(backbone, rng)
    graph = cached_step_model(backbone, head)
    xla = tf.function(graph.python_function, jit_compile=True)
    static = export_step(backbone, head, 1)
    callables = {
        "graph": lambda: [t.numpy() for t in tf.nest.flatten(graph(token, filled))],
        "xla": lambda: [t.numpy() for t in tf.nest.flatten(xla(token, filled))],
        "litert_batch_1": litert_runner(static, backbone, token, filled),
        "litert_dynamic_batch": litert_runner(export_step(backbone, head, None), backbone, token, filled),
        "litert_converter_order": litert_runner(converter_order(static), backbone, token, filled),
    }
    for fn in callables.values():
        for _ in range(2):
            fn()
    samples = round_robin([rewarmed(lambda fn=fn: time_once(fn)) for fn in callables.values()], args.repeats)
    return {name: float(np.median(times)) for name, times in zip(callables, samples)}


def describe(size):
    layers, heads, head_size, inner = size
    return f"{layers} layers, d = {heads * head_size}"


def render(args, rows, size, device_rows, loads):
    layers, heads, head_size, inner = size
    lines = section_header("Transformer-XL: cached evaluation against recomputing the context", args.quick,
                           {"ai-edge-litert": importlib.metadata.version("ai-edge-litert")})
    lines += [
        f"- Load average (1 / 5 / 15 min): {' / '.join(f'{x:.2f}' for x in loads[0])} before the run, "
        f"{' / '.join(f'{x:.2f}' for x in loads[1])} after",

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
    lines += [
        "",
        "The exported step against the TF graph step: full memory, batch 1, one token per step, medians of "
        f"{args.repeats} rounds of one round robin (each call after an untimed one); LiteRT: a fresh interpreter "
        "with its default delegates (XNNPACK). Converter's order: the batch-1 file with `chunk_length` as its "
        "first subgraph, as export_tflite wrote it before; LiteRT delegates none of its subgraphs.",
        "",
        "| model | context C | graph (ms) | XLA (ms) | LiteRT, batch-1 file (ms) | LiteRT, dynamic batch (ms) "
        "| LiteRT, converter's order (ms) | LiteRT batch-1 ÷ graph |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size_, context, r in device_rows:
        ms = {k: v * 1e3 for k, v in r.items()}
        lines.append(
            f"| {describe(size_)} | {context:,} | {ms['graph']:.2f} | {ms['xla']:.2f} | {ms['litert_batch_1']:.2f} "
            f"| {ms['litert_dynamic_batch']:.2f} | {ms['litert_converter_order']:.2f} "
            f"| {r['litert_batch_1'] / r['graph']:.2f} |"
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
    load_before = os.getloadavg()
    contexts, size = ((16, 32), (1, 2, 4, 16)) if args.quick else ((512, 2048, 8192), SMALL)
    device = [((1, 2, 4, 16), 16)] if args.quick else [(s, c) for s in (SMALL, LARGE) for c in (512, 2048)]
    if args.quick:
        args.repeats = min(args.repeats, 4)
    rows = [measure(c, size, args) for c in contexts]
    device_rows = []
    for size_, context in device:
        device_rows.append((size_, context, measure_device_step(context, size_, args)))
        print(f"[{time.perf_counter() - t0:6.0f}s] {describe(size_)}, C = {context}: "
              + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in device_rows[-1][2].items()), flush=True)
    section = write_section(args.output, SECTION,
                            render(args, rows, size, device_rows, (load_before, os.getloadavg())))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
