"""Transformer-XL at WikiText-103 size: adaptive input and softmax, cached
generation, on CPU.

HuggingFace's TransfoXL configuration for WikiText-103 (transformers
4.35.0's default `TransfoXLConfig`, kept in
tests/goldens/transfo_xl_wt103_parameters.npz with HF's parameter counts):
18 layers, d = 1,024, 16 heads of 64, d_inner = 4,096, a vocabulary of
267,735 tokens in an adaptive input embedding and an adaptive softmax
(cutoffs 20,000 / 40,000 / 200,000, div_val 4, tables tied, projections
tied but the first), mem_len 1,600, clamp_len 1,000, same_length; random
weights (Keras' initializers, seed 0), float32. `build_hf_transfo_xl`
builds the `TransformerXL` (with its `AdaptiveEmbedding`) and the
`AdaptiveSoftmax`; the script asserts that their unique parameters (the
softmax's tied tables and projections are the embedding's variables) are
HF's, in total and per part.

Then `TransformerXLGenerator(backbone, head)` generates greedily, batch 1,
in token mode (each new token a segment of its own, attending to the
key/value cache of the last mem_len positions), after a prompt of one
segment (`--segment-len` tokens): on TensorFlow with `jit_compile=True`
(XLA) and `False` (a TF graph), and on JAX. Each runs in a fresh process
of its own (`--worker`, KERAS_BACKEND set), so that its resident memory is
its own. A `generate` call also runs the prompt's segment and projects the
memories into the cache, once per call; the cost per new token is
therefore the slope between two calls, `generate(prompt, 8)` and
`generate(prompt, 8 + --new-tokens)`, per round of a round robin with the
prompt's step alone (`generator.step(..., last_only=True)`, as `generate`
runs it), after one untimed (compiling) call of each: the median of
`--repeats` rounds. The cache has a fixed size
(`SegmentRecurrence.call_with_cache`: keys and values in rings of mem_len
slots, every slot scored, the empty ones masked), so that cost does not
depend on how full the memory is. Compile time = the first call less the
median of the later ones: the prompt's step (called alone first), then
each loop.

Memory: the weights' bytes; the cache's (keys and values of every layer,
(1, 16, 1,600, 64) each, and every layer's position table (16, 1,600 +
segment_len, 64)); and the process's peak resident set
(`ru_maxrss` after building, after the compiling calls; then `VmHWM` over
the timed calls, the high-water mark reset before them through
/proc/self/clear_refs).

Results go to the `bench_transformer_xl_wt103` section of
benchmarks/RESULTS.md. Full run (about 5 minutes on 2 cores):
    python benchmarks/bench_transformer_xl_wt103.py
Smoke test (the tiny WT103-shaped model of tests/goldens/transfo_xl_lm_wt103.npz):
    python benchmarks/bench_transformer_xl_wt103.py --quick --output /tmp/wt103.md
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402
from results_file import reset_peak  # noqa: E402
from results_file import round_robin  # noqa: E402
from results_file import rss_kib  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import time_once  # noqa: E402
from results_file import write_section  # noqa: E402

SECTION = "bench_transformer_xl_wt103"
GOLDENS = os.path.join(os.path.dirname(_HERE), "tests", "goldens")
WT103 = os.path.join(GOLDENS, "transfo_xl_wt103_parameters.npz")
# A tiny model of WT103's structure (div_val 4, tie_projs [F, T, T, T]), with
# HF's weights: for --quick.
TINY = os.path.join(GOLDENS, "transfo_xl_lm_wt103.npz")
# HF's TransfoXLConfig defaults, WT103's; not in the golden file.
WT103_RECURRENCE = {"mem_len": 1600, "clamp_len": 1000, "same_length": True, "pre_lnorm": False}
SHORT = 8  # new tokens of the shorter of the two timed calls
WORKER = "--worker"
# (mode, KERAS_BACKEND, jit_compile)
MODES = (("xla", "tensorflow", True), ("graph", "tensorflow", False), ("jax", "jax", "auto"))
LABELS = {"xla": "TensorFlow, XLA (`jit_compile=True`)", "graph": "TensorFlow, graph (`jit_compile=False`)",
          "jax": "JAX (XLA)"}
PARTS = ("embedding", "layers", "softmax")


def hf_model(quick):
    """(HF's TransfoXLConfig as a dict, HF's parameter counts {parameters,
    embedding, layers, softmax}) of WT103, or of the tiny model."""
    import numpy as np

    golden = np.load(TINY if quick else WT103)
    config = {key: golden[key].item() for key in (
        "vocab_size", "d_model", "d_embed", "div_val", "n_head", "d_head", "d_inner", "n_layer")}
    config.update(cutoffs=golden["cutoffs"].tolist(), tie_word_embeddings=bool(golden["tie_weight"]),
                  tie_projs=[bool(t) for t in golden["tie_projs"]], untie_r=bool(golden["untie_r"]))
    if not config["untie_r"]:
        raise SystemExit("this benchmark counts the relative biases in the layers (untie_r = True)")
    if quick:
        config.update(mem_len=golden["mem_len"].item(), clamp_len=golden["clamp_len"].item(),
                      same_length=bool(golden["same_length"]), pre_lnorm=bool(golden["pre_lnorm"]))
        # Its state dict lists every tensor, tied ones under each name: the
        # softmax's own weights are what the total leaves.
        counts = {"parameters": golden["parameters"].item()}
        for part, prefix in (("embedding", "param/transformer.word_emb."), ("layers", "param/transformer.layers.")):
            counts[part] = sum(golden[k].size for k in golden.files if k.startswith(prefix))
        counts["softmax"] = counts["parameters"] - counts["embedding"] - counts["layers"]
        return config, counts, golden["seg_len"].item()
    config.update(WT103_RECURRENCE)
    return config, {key: golden[key].item() for key in ("parameters", *PARTS)}, None


def max_rss_kib():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def nbytes(tensors):
    """Bytes of tensors, arrays or variables, from their shapes and dtypes."""
    import keras
    import numpy as np

    return sum(int(np.prod(t.shape)) * np.dtype(keras.backend.standardize_dtype(t.dtype)).itemsize for t in tensors)


def worker(work):
    """In a fresh process, KERAS_BACKEND set: builds, counts, times and
    measures one mode; returns a JSON-able dict."""
    if work["backend"] == "tensorflow":
        results_file.use_tensorflow_backend()
    import keras
    import numpy as np

    from keras_relrec.migrate import build_hf_transfo_xl
    from keras_relrec.models import TransformerXLGenerator

    assert keras.backend.backend() == work["backend"], keras.backend.backend()
    keras.utils.set_random_seed(0)
    row = {"mode": work["mode"]}
    start = time.perf_counter()
    backbone, head = build_hf_transfo_xl(work["config"], segment_len=work["segment_len"])
    row["build_s"] = time.perf_counter() - start
    embedding = backbone.embedding.count_params()
    layers = sum(block.count_params() for block in backbone.blocks)
    assert backbone.count_params() == embedding + layers, "the backbone has weights outside its embedding and blocks"
    row["counts"] = {"parameters": backbone.count_params() + head.count_params(), "embedding": embedding,
                     "layers": layers, "softmax": head.count_params()}
    variables = {id(v): v for v in backbone.weights + head.weights}
    row["weights_bytes"] = nbytes(variables.values())
    row["weight_dtypes"] = sorted({str(v.dtype) for v in variables.values()})
    row["rss_built_kib"] = max_rss_kib()

    generator = TransformerXLGenerator(backbone, head, jit_compile=work["jit_compile"])
    prompt = np.random.default_rng(0).integers(0, work["config"]["vocab_size"], (1, work["segment_len"]))
    short, long = SHORT, SHORT + work["new_tokens"]
    initial = generator.initial_state(1)
    outputs = {}

    def generate(count):
        outputs[count] = generator.generate(prompt, count)

    # The first calls compile: the prompt's step (which `generate` reuses),
    # the long loop, the short loop.
    first_step = time_once(lambda: generator.step(prompt, initial, last_only=True))
    row["rss_step_kib"] = max_rss_kib()
    first_long = time_once(lambda: generate(long))
    first_short = time_once(lambda: generate(short))
    row["rss_compiled_kib"] = max_rss_kib()
    row["peak_reset"] = reset_peak()
    short_s, long_s, step_s = round_robin(
        [lambda: time_once(lambda: generate(short)), lambda: time_once(lambda: generate(long)),
         lambda: time_once(lambda: generator.step(prompt, initial, last_only=True))], work["repeats"])
    row["rss_generation_kib"] = rss_kib("VmHWM")
    slopes = [(b - a) / (long - short) for a, b in zip(short_s, long_s)]
    row.update(
        per_token_s=statistics.median(slopes), slopes_s=slopes, short_s=statistics.median(short_s),
        long_s=statistics.median(long_s), step_s=statistics.median(step_s),
        compile_step_s=first_step - statistics.median(step_s), compile_s=first_long - statistics.median(long_s),
        compile_short_s=first_short - statistics.median(short_s),
        short=short, long=long,
        prefix_equal=bool(np.array_equal(outputs[short], outputs[long][:, : outputs[short].shape[1]])),
    )
    # What the loop starts from: the prompt's memories, then their cache.
    _, states = generator.step(prompt, initial, last_only=True)
    cache = backbone.key_value_cache(states)
    layers_count = backbone.num_layers
    row["states_bytes"] = nbytes(states)
    row["cache_bytes"] = {"keys_values": nbytes(cache[: 2 * layers_count]),
                          "tables": nbytes(cache[2 * layers_count : 3 * layers_count]),
                          "mask_cursor": nbytes(cache[3 * layers_count :])}
    row["cache_shapes"] = {"keys": list(cache[0].shape), "table": list(cache[2 * layers_count].shape)}
    return row


def run_worker(mode, backend, jit_compile, payload):
    """`worker` in a process of its own (stderr passed through, so that a
    failure shows its traceback); its last line of stdout, as JSON."""
    work = {**payload, "mode": mode, "backend": backend, "jit_compile": jit_compile}
    command = [sys.executable, os.path.abspath(__file__), WORKER, json.dumps(work)]
    result = subprocess.run(command, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if result.returncode:
        raise SystemExit(f"the {mode} worker failed (exit {result.returncode}); its traceback is above")
    return json.loads(result.stdout.strip().splitlines()[-1])


def mib(count):
    return count / 2**20


def render(args, config, hf_counts, rows, loads):
    lines = section_header("Transformer-XL at WT103 size: adaptive input and softmax, cached generation", args.quick,
                           {"JAX": results_file.jax_version()})
    first = rows[0]
    cache = first["cache_bytes"]
    keys, table = first["cache_shapes"]["keys"], first["cache_shapes"]["table"]
    lines += [
        f"- Load average (1 / 5 / 15 min): {' / '.join(f'{x:.2f}' for x in loads[0])} before the run, "
        f"{' / '.join(f'{x:.2f}' for x in loads[1])} after",
        f"- Model: HF TransfoXL's WT103 configuration{' (quick: a tiny one of its structure)' if args.quick else ''}: "
        f"{config['n_layer']} layers, d = {config['d_model']:,}, {config['n_head']} heads of {config['d_head']}, "
        f"d_inner = {config['d_inner']:,}, vocabulary {config['vocab_size']:,} (cutoffs "
        f"{', '.join(f'{c:,}' for c in config['cutoffs'])}; div_val {config['div_val']}, d_embed "
        f"{config['d_embed']:,}; tables tied, projections tied {config['tie_projs']}), mem_len "
        f"{config['mem_len']:,}, clamp_len {config['clamp_len']:,}, same_length {config['same_length']}, "
        f"segment_len {args.segment_len} (HF's WT103 evaluation uses tgt_len 128); "
        f"`build_hf_transfo_xl`, random weights, {', '.join(first['weight_dtypes'])}",
        "",
        "Parameters: `backbone.count_params() + head.count_params()` (the head's tied tables and projections are the "
        "embedding's variables, counted once) against HF 4.35.0's `TransfoXLLMHeadModel` (tied tensors once); "
        "asserted equal, per part, on each backend.",
        "",
        "| part | keras_relrec | HF TransfoXL |",
        "|---|---:|---:|",
    ]
    ours = first["counts"]
    names = {"embedding": "adaptive input embedding (`transformer.word_emb`)",
             "layers": f"{config['n_layer']} layers (`transformer.layers`)",
             "softmax": "adaptive softmax, its own weights (`crit`)", "parameters": "**total**"}
    for part in (*PARTS, "parameters"):
        lines.append(f"| {names[part]} | {ours[part]:,} | {hf_counts[part]:,} |")
    lines += [
        "",
        f"Greedy generation, batch 1, token mode, after a prompt of one segment ({args.segment_len} tokens, which the "
        f"memory of {config['mem_len']:,} slots then holds). Per new token: the slope between `generate(prompt, "
        f"{SHORT})` and `generate(prompt, {SHORT + args.new_tokens})`, median over {args.repeats} rounds of a round "
        "robin (each round: the two calls and the prompt's step alone), after one untimed call of each. Per call, "
        "beside the tokens: the prompt's segment and the projection of the memories into the cache. Compile: the "
        "first call less the median later one: the prompt's step (called alone first), then each loop. Each "
        "backend in a fresh process.",
        "",
        "| backend | ms / token (range over rounds) | tokens/s "
        f"| compile (s): prompt step / loop +{SHORT + args.new_tokens} / loop +{SHORT} "
        f"| `generate`, +{SHORT} / +{SHORT + args.new_tokens} tokens (s) | prompt step alone (s) "
        "| peak RSS (MiB): built / + prompt step / + loops / timed generation |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {LABELS[r['mode']]} | {r['per_token_s'] * 1e3:.1f} ({min(r['slopes_s']) * 1e3:.1f}–"
            f"{max(r['slopes_s']) * 1e3:.1f}) | {1 / r['per_token_s']:.1f} "
            f"| {r['compile_step_s']:.1f} / {r['compile_s']:.1f} / {r['compile_short_s']:.1f} "
            f"| {r['short_s']:.2f} / {r['long_s']:.2f} | {r['step_s']:.2f} "
            f"| {r['rss_built_kib'] / 1024:,.0f} / {r['rss_step_kib'] / 1024:,.0f} / "
            f"{r['rss_compiled_kib'] / 1024:,.0f} / "
            f"{r['rss_generation_kib'] / 1024:,.0f}{'' if r['peak_reset'] else ' (not reset)'} |"
        )
    total_cache = sum(cache.values())
    lines += [
        "",
        f"Memory (float32): weights {first['weights_bytes']:,} bytes ({mib(first['weights_bytes']):,.0f} MiB); the "
        f"cache {total_cache:,} bytes ({mib(total_cache):,.1f} MiB): keys and values "
        f"{cache['keys_values']:,} ({config['n_layer']} layers × 2 × {' × '.join(map(str, keys))}), position tables "
        f"{cache['tables']:,} ({config['n_layer']} × {' × '.join(map(str, table))}), memory mask and cursor "
        f"{cache['mask_cursor']:,}; the memories the prompt's step returns, from which `generate` projects the "
        f"cache, {first['states_bytes']:,} bytes ({mib(first['states_bytes']):,.1f} MiB). Peak RSS: "
        "`ru_maxrss` after building (TensorFlow or JAX loaded, weights initialized), after the prompt's first "
        "step (compiled and run: the log-probabilities of its last position over the whole vocabulary) and after "
        "the first call of each loop; then the high-water mark `VmHWM` over the timed calls alone, reset before them "
        "(/proc/self/clear_refs).",
    ]
    if not all(r["prefix_equal"] for r in rows):
        lines.append("")
        lines.append("**The short call's tokens are not a prefix of the long call's on "
                     + ", ".join(r["mode"] for r in rows if not r["prefix_equal"]) + ".**")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "a tiny model of WT103's structure, under a minute")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--segment-len", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32,
                        help=f"tokens between the two timed calls ({SHORT} and {SHORT} + this)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    results_file.use_tensorflow_backend()
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    config, hf_counts, segment_len = hf_model(args.quick)
    if args.quick:
        args.repeats, args.new_tokens, args.segment_len = min(args.repeats, 2), 4, segment_len
    payload = {"config": config, "segment_len": args.segment_len, "new_tokens": args.new_tokens,
               "repeats": args.repeats}
    rows = []
    for mode, backend, jit_compile in MODES:
        rows.append(run_worker(mode, backend, jit_compile, payload))
        row = rows[-1]
        assert row["counts"] == hf_counts, f"{mode}: parameters {row['counts']}, HF's {hf_counts}"
        print(f"[{time.perf_counter() - t0:6.0f}s] {mode}: {row['per_token_s'] * 1e3:.1f} ms/token "
              f"(rounds: {', '.join(f'{x * 1e3:.1f}' for x in row['slopes_s'])}), "
              f"compile {row['compile_step_s']:.1f}s + {row['compile_s']:.1f}s, "
              f"peak RSS {row['rss_generation_kib'] / 1024:,.0f} MiB", flush=True)
    section = write_section(args.output, SECTION, render(args, config, hf_counts, rows,
                                                         (load_before, os.getloadavg())))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    if WORKER in sys.argv:
        print(json.dumps(worker(json.loads(sys.argv[sys.argv.index(WORKER) + 1]))))
    else:
        main()
