"""A user's first result: how long the first training step, a generator's
first call and a streaming export take, each in a fresh process.

The job is a character-sized language model (vocabulary 128, d = 64, two
layers, batch 16, 128 tokens a row): a Transformer-XL (4 heads of 16,
d_inner = 256, segments of 16 with a memory of 32, so eight segments a
row) against two stacked LSTMs of 64 units on the same data, each behind an
embedding and a Dense head, trained with Adam on the cross-entropy. Times:

- **first step**: `train_on_batch` from a compiled, never-run model: the
  trace, the compile (XLA with `jit_compile=True`; TensorFlow's graph
  without, Keras' default on a CPU; `jax.jit` on JAX) and the step itself;
  then the median of seven steps after one more, the steady cost, to tell
  them apart; once as Keras does it, once with the training state made
  first (`keras_relrec.models.build_training_state`: on TensorFlow
  without it the optimizer's slots are made inside the first step's
  trace, which TensorFlow then traces again);
- **generator's first call**: `TransformerXLGenerator.generate` of 32 new
  tokens after a prompt of 16, token mode, greedy (its default XLA);
- **streaming export**: `export_tflite(model, streaming=True)` of the
  Transformer-XL language model.

Every job runs in a process of its own (a compile is cached in its
process), each once per round, the rounds interleaved; medians over
`--repeats` rounds. With `--baseline COMMIT` every job also runs with the
package as it was at that commit of this repository (`git archive`), in
the same rounds, for a before-and-after of one machine and one day.

Results are written to the `bench_first_step` section of
benchmarks/RESULTS.md. Full run (about two minutes on 2 cores; twice that
with a baseline):
    python benchmarks/bench_first_step.py [--baseline COMMIT]
Smoke test:
    python benchmarks/bench_first_step.py --quick --output /tmp/first.md
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

SECTION = "bench_first_step"
VOCABULARY = 128
FULL = {"layers": 2, "heads": 4, "head_size": 16, "inner": 256, "segment": 16, "memory": 32, "batch": 16,
        "steps": 128, "prompt": 16, "new_tokens": 32}
QUICK = {"layers": 1, "heads": 2, "head_size": 4, "inner": 8, "segment": 4, "memory": 4, "batch": 2,
         "steps": 16, "prompt": 4, "new_tokens": 4}
# (model, what, mode): the jobs, each a fresh process.
FIT_JOBS = [(model, "fit", mode) for mode in ("graph", "xla", "jax") for model in ("LSTM", "Transformer-XL")]
# JAX's trainer makes the state before the first step itself.
BUILT_FIRST = "fit, state made first"
FIT_JOBS += [(model, BUILT_FIRST, mode) for mode in ("graph", "xla") for model in ("LSTM", "Transformer-XL")]
OTHER_JOBS = [("Transformer-XL", "generate", "xla"), ("Transformer-XL", "export", "graph")]


def language_model(kind, size):
    import keras

    from keras_relrec.layers import TransformerXL

    d = size["heads"] * size["head_size"]
    tokens = keras.Input((size["steps"],), dtype="int32", name="tokens")
    if kind == "LSTM":
        h = keras.layers.Embedding(VOCABULARY, d)(tokens)
        for _ in range(size["layers"]):
            h = keras.layers.LSTM(d, return_sequences=True)(h)
        return keras.Model(tokens, keras.layers.Dense(VOCABULARY)(h)), None, None
    backbone = TransformerXL(size["layers"], size["heads"], size["head_size"], d, size["inner"],
                             segment_len=size["segment"], mem_len=size["memory"], vocabulary_size=VOCABULARY)
    head = keras.layers.Dense(VOCABULARY)
    return keras.Model(tokens, head(backbone(tokens))), backbone, head


def run_job(job):
    """One job in this process: {"first": s, "second": s} for a fit, {"first": s} otherwise."""
    import keras
    import numpy as np

    model_kind, what, mode, size = job["model"], job["what"], job["mode"], job["size"]
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.integers(0, VOCABULARY, (size["batch"], size["steps"])).astype("int32")
    model, backbone, head = language_model(model_kind, size)
    if what in ("fit", BUILT_FIRST):
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile={"graph": False, "xla": True, "jax": "auto"}[mode])
        if what == BUILT_FIRST:
            try:
                from keras_relrec.models import build_training_state
            except ImportError:  # a baseline from before it
                return {}

        def first_step():
            # Making the state is part of the first step's time.
            if what == BUILT_FIRST:
                build_training_state(model, x, x)
            model.train_on_batch(x, x)

        first = results_file.time_once(first_step)
        return {"first": first, "second": results_file.median_seconds(lambda: model.train_on_batch(x, x), 7, 1)}
    if what == "generate":
        from keras_relrec.models import TransformerXLGenerator

        generator = TransformerXLGenerator(backbone, head)
        prompt = x[:1, : size["prompt"]]
        return {"first": results_file.time_once(lambda: generator.generate(prompt, size["new_tokens"]))}
    from keras_relrec.export import export_tflite

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "lm.tflite")
        return {"first": results_file.time_once(lambda: export_tflite(model, path, streaming=True))}


def in_fresh_process(job, checkout):
    """`run_job(job)` in a new interpreter; `checkout`: whose package it imports (None: this tree's)."""
    env = dict(os.environ, KERAS_BACKEND="jax" if job["mode"] == "jax" else "tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    if checkout:
        env["PYTHONPATH"] = os.pathsep.join([checkout, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(job)], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        return {"error": results_file.one_line(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - start
    return result


def median(results, key):
    values = [r[key] for r in results if key in r]
    return statistics.median(values) if values else None


def seconds(value):
    return "–" if value is None else f"{value:.1f} s"


def milliseconds(value):
    return "–" if value is None else f"{value * 1e3:.0f} ms"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    results_file.add_common_arguments(parser, "tiny sizes, one round, TensorFlow graph jobs only")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of every job (default 1)")
    parser.add_argument("--baseline", help="an earlier commit, whose package runs every job too")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        results_file.use_tensorflow_backend()
        print(json.dumps(run_job(json.loads(args.worker))))
        return
    size = QUICK if args.quick else FULL
    jobs = FIT_JOBS + OTHER_JOBS
    if args.quick:
        jobs = [job for job in jobs if job[2] == "graph"]
    with tempfile.TemporaryDirectory() as folder:
        trees = [("this tree", None)]
        if args.baseline:
            commit = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=_HERE, check=True,
                                    capture_output=True, text=True).stdout.strip()
            archive = subprocess.run(["git", "archive", commit, "keras_relrec"], cwd=os.path.dirname(_HERE),
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
            trees.append((commit, folder))
        results = {(tree, job): [] for tree, _ in trees for job in jobs}
        for _ in range(1 if args.quick else args.repeats):
            for job in jobs:
                for tree, checkout in trees:
                    spec = {"model": job[0], "what": job[1], "mode": job[2], "size": size}
                    results[tree, job].append(in_fresh_process(spec, checkout))
                    print(tree, job, results[tree, job][-1], flush=True)

    results_file.use_tensorflow_backend()
    lines = results_file.section_header("A first result: first training step, first generation, export",
                                        args.quick)
    lines += [
        f"- Job: vocabulary {VOCABULARY}, {size['layers']} layers, d = {size['heads'] * size['head_size']}, "
        f"batch {size['batch']}, {size['steps']} tokens; Transformer-XL segments of {size['segment']}, memory "
        f"{size['memory']}; medians of {len(next(iter(results.values())))} fresh process(es) per cell"
        + (f"; the baseline is the package at commit {trees[1][0]}" if args.baseline else ""),
        "",
        "| model | job | compile | " + " | ".join(f"first ({tree})" for tree, _ in trees) + " | "
        + " | ".join(f"a later step ({tree})" for tree, _ in trees) + " |",
        "|---|---|---|" + "---|" * (2 * len(trees)),
    ]
    for job in jobs:
        cells = []
        for tree, _ in trees:
            errors = [r["error"] for r in results[tree, job] if "error" in r]
            cells.append(f"failed: {errors[0]}" if errors else seconds(median(results[tree, job], "first")))
        later = [milliseconds(median(results[tree, job], "second")) for tree, _ in trees]
        lines.append(f"| {job[0]} | {job[1]} | {job[2]} | " + " | ".join(cells + later) + " |")
    lines.append("")
    for what, mode in dict.fromkeys((what, mode) for _, what, mode in FIT_JOBS):
        lstm = median(results.get(("this tree", ("LSTM", what, mode)), []), "first")
        txl = median(results.get(("this tree", ("Transformer-XL", what, mode)), []), "first")
        if lstm and txl:
            lines.append(f"- First step ({what}), {mode}: the Transformer-XL's takes {txl / lstm:.2f}× the LSTM's.")
    results_file.write_section(args.output, SECTION, "\n".join(lines))


if __name__ == "__main__":
    main()
