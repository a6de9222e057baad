"""Benchmark the neural bag-of-features layers on CPU: throughput and memory.

Two models, trained with Adam on sparse categorical cross-entropy from
logits:

- quantizer + attention: `Input((T, D)) -> BoFQuantizer(K)` (memberships)
  `-> TwoDAttention(axis=2)` (codeword attention)
  `-> TwoDAttention(axis=1)` (temporal attention)
  `-> GlobalAveragePooling1D -> Dense(8)`;
- quantizer only: `Input((T, D)) -> BoFQuantizer(K, output_mode="histogram")
  -> Dense(8)`.

One `train_on_batch` and one `predict_on_batch` call are timed, each variant
once per round (round robin over all variants of the run), and summarized by
the median; throughput is given in frames (B·T per call) and sequences (B)
per second.

1. Codeword sweep: K from 64 to 1024 at length T = 128.
2. Length sweep: T from 32 to 512 at K = 256.
   Both for the float32 and mixed_bfloat16 dtype policies, with
   `jit_compile` False and True.
3. Memory at the largest K and T: an analytic count of the main tensors
   and the process's peak RSS before and after building and running that
   model (float32, no XLA), measured before any other model is built.

Results are written to the `bench_bag_of_features` section of
benchmarks/RESULTS.md.

Full run (56 models, each traced and half of them XLA-compiled; expect
several minutes on 2 cores):
    python benchmarks/bench_bag_of_features.py
Smoke test (well under a minute):
    python benchmarks/bench_bag_of_features.py --quick --output /tmp/bof.md
"""

import argparse
import contextlib
import dataclasses
import os
import resource
import sys
import time

# The shared helpers live next to this file; inserting the folder makes the
# import work however the script is started.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402

results_file.use_tensorflow_backend()

import keras  # noqa: E402
import numpy as np  # noqa: E402
from results_file import prepare_and_time  # noqa: E402
from results_file import section_header  # noqa: E402
from results_file import write_section  # noqa: E402

from keras_relrec.layers import BoFQuantizer  # noqa: E402
from keras_relrec.layers import TwoDAttention  # noqa: E402

SECTION = "bench_bag_of_features"
NUM_CLASSES = 8
MODELS = {"attention": "quantizer + attention", "quantizer": "quantizer only"}
POLICY_LABELS = {"float32": "f32", "mixed_bfloat16": "bf16", "mixed_float16": "f16"}


@dataclasses.dataclass(frozen=True)
class Spec:
    """One benchmarked model; equal specs are built and timed only once, so
    the point both sweeps share (K of the length sweep at T of the codeword
    sweep) costs one compile and one set of samples."""

    model: str  # a key of MODELS
    batch: int
    seq_len: int
    features: int
    codewords: int
    jit: bool
    policy: str  # a Keras dtype policy name


def combo_label(policy, jit):
    return POLICY_LABELS[policy] + ("+XLA" if jit else "")


@contextlib.contextmanager
def dtype_policy(name):
    """Makes `name` the global dtype policy inside the block only, so each
    model gets its own policy and later models are not built under it."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def make_data(spec):
    """Random inputs and labels: the values do not change the work done."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((spec.batch, spec.seq_len, spec.features), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, spec.batch).astype(np.int32)
    return x, y


def build_model(spec):
    """The compiled model of `spec`, built under the current dtype policy."""
    inputs = keras.Input((spec.seq_len, spec.features))
    if spec.model == "quantizer":
        x = BoFQuantizer(spec.codewords, output_mode="histogram")(inputs)
    else:
        x = BoFQuantizer(spec.codewords)(inputs)
        x = TwoDAttention(axis=2)(x)  # codeword attention
        x = TwoDAttention(axis=1)(x)  # temporal attention
        x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, keras.layers.Dense(NUM_CLASSES)(x))
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # Explicit: "auto" means no XLA on CPU TF.
        jit_compile=spec.jit,
    )
    return model


def prepare(spec, warmup):
    """A compiled model with warmed-up (traced, and for jit XLA-compiled)
    train and inference callables. `train_on_batch`/`predict_on_batch`
    return NumPy values, so each call waits for its result.

    Seeding happens once, in `main`: `tf.random.set_seed` makes every
    existing tf.function retrace, so seeding here would recompile the models
    prepared before this one during their timed calls."""
    x, y = make_data(spec)
    t0 = time.perf_counter()
    # The warm-up traces the step functions, so it runs under the model's
    # policy too: nothing traced later may see another model's policy.
    with dtype_policy(spec.policy):
        model = build_model(spec)
        train = lambda: model.train_on_batch(x, y)  # noqa: E731
        infer = lambda: model.predict_on_batch(x)  # noqa: E731
        for _ in range(warmup):
            train(), infer()
    # The quantizer must compute in the spec's policy, or the tables would
    # label one precision with another's times.
    expected = keras.DTypePolicy(spec.policy).compute_dtype
    if model.layers[1].compute_dtype != expected:
        raise RuntimeError(f"{describe(spec)} computes in {model.layers[1].compute_dtype}, "
                           f"not {expected}")
    return {
        "train": train,
        "infer": infer,
        # Keras may silently drop jit; report what actually ran.
        "effective_jit": bool(model.jit_compile),
        "warmup_s": time.perf_counter() - t0,
    }


def forward_flops(spec):
    """Matmul FLOPs of one forward pass over the batch: the quantizer's two
    (B·T × D)(D × K) products, the codeword attention's (B·T × K)(K × K),
    the temporal attention's (T × T) mixing of every (T × K) matrix, and the
    head."""
    b, t, d, k = spec.batch, spec.seq_len, spec.features, spec.codewords
    flops = 4 * b * t * d * k + 2 * b * k * NUM_CLASSES
    if spec.model == "attention":
        flops += 2 * b * t * k * k + 2 * b * t * t * k
    return flops


# The main forward tensors of the attention model, for the memory count:
# (tensor, how many B·T·K-element tensors, whether float32 under any policy).
MEMORY_TENSORS = [
    ("memberships φ (quantizer output)", 1, False),
    ("expanded squared distance: the two matmuls and their sum", 3, True),
    ("attention weights A, codeword and temporal", 2, False),
    ("attended outputs S̃, codeword and temporal", 2, False),
]


def peak_rss_mib():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_memory(spec):
    """Peak RSS before building `spec`'s model, after building it, and after
    its first train and inference calls. Run before any other model: peak
    RSS only ever grows, so a model built later would hide under the peaks
    of earlier ones."""
    x, y = make_data(spec)
    rss = {"before": peak_rss_mib()}
    with dtype_policy(spec.policy):
        model = build_model(spec)
        rss["built"] = peak_rss_mib()
        model.train_on_batch(x, y)
        model.predict_on_batch(x)
    rss["ran"] = peak_rss_mib()
    print(f"memory model {describe(spec)}: peak RSS {rss['before']:.0f} -> "
          f"{rss['built']:.0f} -> {rss['ran']:.0f} MiB", flush=True)
    return rss


def plan(args):
    """Every spec the run needs: per sweep, rows of (swept value, model,
    {(policy, jit): spec}), and the memory spec."""
    combos = [(policy, jit) for policy in args.policies for jit in args.jits]

    def rows(value, seq_len, codewords):
        return [(value, model, {
            (policy, jit): Spec(model, args.batch, seq_len, args.features, codewords, jit, policy)
            for policy, jit in combos}) for model in MODELS]

    return {
        "combos": combos,
        "codewords": [r for k in args.codewords for r in rows(k, args.sweep_length, k)],
        "lengths": [r for t in args.lengths for r in rows(t, t, args.sweep_codewords)],
        "memory": Spec("attention", args.batch, max(args.lengths), args.features,
                       max(args.codewords), False, "float32"),
    }


def measure(p, args):
    """Prepares every distinct spec and times them all in one round robin.

    Returns {(spec, "train" | "infer"): median seconds} and {spec: prepared}.
    """
    specs = list(dict.fromkeys(spec for _, _, by_combo in p["codewords"] + p["lengths"]
                               for spec in by_combo.values()))
    keys = [(spec, kind) for spec in specs for kind in ("train", "infer")]
    return prepare_and_time(keys, lambda spec: prepare(spec, args.warmup), describe,
                            args.repeats)


def describe(spec):
    return (f"{MODELS[spec.model]} K={spec.codewords} B={spec.batch} T={spec.seq_len} "
            f"D={spec.features} {spec.policy} jit={spec.jit}")


def rate(per_second):
    """A rate with a k/M suffix, three significant digits."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.3g}{suffix}"
    return f"{per_second:.3g}"


def sweep_table(title, rows, combos, med):
    heads = " | ".join(f"{label} train ms | {label} infer ms | {label} infer frames/s"
                       for label in (combo_label(*c) for c in combos))
    out = [f"| {title} | Model | Fwd GFLOP | {heads} |",
           "|---:|---|---:|" + "---:|" * (3 * len(combos))]
    for value, model, by_combo in rows:
        cells = []
        for combo in combos:
            spec = by_combo[combo]
            train, infer = med[(spec, "train")], med[(spec, "infer")]
            cells.append(f"{train * 1e3:.2f} | {infer * 1e3:.2f} | "
                         f"{rate(spec.batch * spec.seq_len / infer)}")
        any_spec = by_combo[combos[0]]
        out.append(f"| {value} | {MODELS[model]} | {forward_flops(any_spec) / 1e9:.3g} | "
                   f"{' | '.join(cells)} |")
    return out


def growth_lines(name, rows, combos, med):
    """Per model, how much the time grows from the sweep's first point to
    its last, against the growth of the value and of the forward FLOPs."""
    out = []
    combo = combos[0]
    for model, label in MODELS.items():
        points = [(value, by_combo) for value, m, by_combo in rows if m == model]
        if len(points) < 2:
            continue
        (v0, first), (v1, last) = points[0], points[-1]
        ratios = {}
        for kind in ("train", "infer"):
            r = [med[(last[c], kind)] / med[(first[c], kind)] for c in combos]
            spread = f" (×{min(r):.1f}–{max(r):.1f} over all {len(r)} settings)"
            ratios[kind] = f"×{r[0]:.1f}" + (spread if len(r) > 1 else "")
        a, b = first[combo], last[combo]
        seqs = [s.batch / med[(s, "infer")] for s in (a, b)]
        frames = [s.batch * s.seq_len / med[(s, "infer")] for s in (a, b)]
        out.append(
            f"- {name} {v0} → {v1}, {label}, at {combo_label(*combo)}: training time "
            f"{ratios['train']}, inference time {ratios['infer']}, for ×{v1 / v0:.0f} "
            f"the {name} and ×{forward_flops(b) / forward_flops(a):.1f} the forward FLOPs; "
            f"inference {rate(seqs[0])} → {rate(seqs[1])} sequences/s "
            f"({rate(frames[0])} → {rate(frames[1])} frames/s).")
    return out


def memory_lines(spec, rss):
    n = spec.batch * spec.seq_len * spec.codewords
    mib = 2**20
    out = [
        "",
        f"### 3. Memory at the largest size (K = {spec.codewords}, T = {spec.seq_len}, "
        f"quantizer + attention)",
        "",
        f"Analytic: the main forward tensors, each B·T·K = {n:,} elements; under "
        "mixed_bfloat16 all but the distance terms (computed in float32 under any "
        "policy) take half the bytes. Backprop keeps most of them and its gradients "
        "have the same shapes; XLA may fuse some away.",
        "",
        "| Tensor | × B·T·K | float32 MiB | mixed_bfloat16 MiB |",
        "|---|---:|---:|---:|",
    ]
    totals = [0, 0]
    for name, count, always_f32 in MEMORY_TENSORS:
        f32, bf16 = 4 * count * n, (4 if always_f32 else 2) * count * n
        totals = [totals[0] + f32, totals[1] + bf16]
        out.append(f"| {name} | {count} | {f32 / mib:.3g} | {bf16 / mib:.3g} |")
    out.append(f"| total | | {totals[0] / mib:.3g} | {totals[1] / mib:.3g} |")
    kernels = 4 * (spec.codewords ** 2 + spec.seq_len ** 2)
    out += [
        "",
        f"The attention kernels W (K × K and T × T) add {kernels / mib:.3g} MiB of "
        "weights (three times that with Adam's slots).",
        "",
        "Measured: the process's peak RSS (`resource.getrusage(RUSAGE_SELF).ru_maxrss`) "
        "— process-wide and a high-water mark, so the TensorFlow runtime, graph "
        "tracing and the allocator's caches count too. This model (float32, no XLA) "
        "was built and run before any other model of the run: peak RSS "
        f"{rss['before']:.0f} MiB before it, {rss['built']:.0f} MiB after building and "
        f"compiling it, {rss['ran']:.0f} MiB after its first `train_on_batch` and "
        f"`predict_on_batch` (tracing included), i.e. +{rss['ran'] - rss['before']:.0f} "
        f"MiB against {totals[0] / mib:.3g} MiB of forward tensors counted above. "
        f"The whole run's peak RSS was {rss['end']:.0f} MiB.",
    ]
    return out


def render(args, p, med, prepared, rss):
    combos = p["combos"]
    lines = section_header("Neural bag-of-features: quantizer and 2-D attention throughput "
                           "(`bench_bag_of_features.py`)", args.quick)
    lines += [
        f"- Models: *quantizer + attention* `Input((T, D)) -> BoFQuantizer(K) -> "
        "TwoDAttention(axis=2) -> TwoDAttention(axis=1) -> GlobalAveragePooling1D -> "
        f"Dense({NUM_CLASSES})` (memberships, codeword attention, temporal attention); "
        "*quantizer only* `Input((T, D)) -> BoFQuantizer(K, output_mode=\"histogram\") "
        f"-> Dense({NUM_CLASSES})`. Default layer arguments (l2 distance, per-dimension "
        "scales, random codebook); random inputs and labels; Adam, sparse categorical "
        "cross-entropy from logits",
        f"- Shapes: batch B = {args.batch}, D = {args.features} features; codeword sweep "
        f"K ∈ {{{', '.join(map(str, args.codewords))}}} at T = {args.sweep_length}; "
        f"length sweep T ∈ {{{', '.join(map(str, args.lengths))}}} at "
        f"K = {args.sweep_codewords}",
        "- Timing: one `train_on_batch` / `predict_on_batch` call; median of "
        f"{args.repeats} rounds, every variant of the run timed once per round (round "
        f"robin), after {args.warmup} warm-up call(s)",
        "- Settings: " + ", ".join(f"*{combo_label(*c)}* = {c[0]}, jit_compile={c[1]}"
                                   for c in combos)
        + (". Under mixed precision the weights stay float32 and the quantizer "
           "computes its distances in float32"
           if any(policy != "float32" for policy in args.policies) else ""),
        "- Throughput: frames/s = B·T / inference time, sequences/s = B / inference "
        "time = frames/s ÷ T. Fwd GFLOP: matmuls of one forward pass over the batch "
        "(the codeword attention's grow as T·K², the temporal attention's as T²·K)",
    ]
    if "mixed_float16" not in args.policies:
        lines.append(
            "- mixed_float16 was not timed: TensorFlow runs much of float16 on CPU by "
            "converting to float32, so its CPU times would say little about float16 "
            "hardware (`--policies mixed_float16` times it)")
    dropped = [describe(s) for s, v in prepared.items() if v["effective_jit"] != s.jit]
    if dropped:
        lines.append("- **Keras did not honour jit_compile=True for:** " + "; ".join(dropped))
    lines += ["", f"### 1. Codeword sweep (T = {args.sweep_length})", ""]
    lines += sweep_table("K", p["codewords"], combos, med)
    lines += ["", f"### 2. Length sweep (K = {args.sweep_codewords})", ""]
    lines += sweep_table("T", p["lengths"], combos, med)
    lines += ["", "How time grows from the smallest to the largest size:", ""]
    lines += growth_lines("codewords", p["codewords"], combos, med)
    lines += growth_lines("length", p["lengths"], combos, med)
    lines += memory_lines(p["memory"], rss)
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=10, help="timed rounds (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--features", type=int, default=32, help="D, features per frame")
    p.add_argument("--codewords", type=int, nargs="+", default=[64, 128, 256, 512, 1024],
                   help="K of the codeword sweep")
    p.add_argument("--sweep-length", type=int, default=128, help="T of the codeword sweep")
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512],
                   help="T of the length sweep")
    p.add_argument("--sweep-codewords", type=int, default=256, help="K of the length sweep")
    # Defaults resolved below: --quick times float32 without XLA only, because
    # an XLA compile costs seconds even for a tiny model.
    p.add_argument("--policies", nargs="+", choices=list(POLICY_LABELS), default=None,
                   help="dtype policies (default float32 mixed_bfloat16; float32 with --quick)")
    p.add_argument("--jit", choices=["true", "false", "both"], default=None,
                   help="jit_compile settings (default both; false with --quick)")
    results_file.add_common_arguments(p, "tiny sizes and 2 repeats, for smoke tests")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.warmup = 2, 1
        args.batch, args.features = 4, 8
        args.codewords, args.sweep_length = [8, 16], 8
        args.lengths, args.sweep_codewords = [4, 8], 16
    if args.policies is None:
        args.policies = ["float32"] if args.quick else ["float32", "mixed_bfloat16"]
    if args.jit is None:
        args.jit = "false" if args.quick else "both"
    args.jits = (False, True) if args.jit == "both" else (args.jit == "true",)
    return args


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    p = plan(args)
    rss = measure_memory(p["memory"])
    med, prepared = measure(p, args)
    rss["end"] = peak_rss_mib()
    section = write_section(args.output, SECTION, render(args, p, med, prepared, rss))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
