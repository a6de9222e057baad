"""Benchmark `RelationalMemoryCell` (RMC) on CPU: cost, scaling, profile.

Every model is `Input((T, D)) -> RNN(cell) -> Dense(8)` trained with Adam
on sparse categorical cross-entropy from logits; `train_on_batch` and
`predict_on_batch` are timed, each variant once per round (round robin
over all variants of the run), and summarized by the median.

1. RMC against a `keras.layers.LSTM` whose recurrent layer has about the
   same number of parameters, for a paper-sized Nth-farthest configuration
   (rows 40 wide, length 8, 8 slots x 8 heads x 64) and a small one
   (4 slots x 2 heads x 32, rows 16 wide, length 8), with `jit_compile`
   False and True.
2. Scaling of the small configuration with the number of memory slots and
   with the sequence length, with an analytic count of the attention
   weights and of the activations a training step stores.
3. Where an RMC training step goes, from ablations: one more attention
   block, one MLP layer fewer, no gates.
4. The cell before and after the gating rewrite, timed in the same
   round robin: the "before" cell is read from the repository's history
   (`--baseline-ref`, a commit), so the comparison needs a git checkout.

Results are written to the `bench_relational_memory` section of
benchmarks/RESULTS.md.

Full run (about 5-10 minutes on 2 cores):
    python benchmarks/bench_relational_memory.py
Smoke test (well under a minute):
    python benchmarks/bench_relational_memory.py --quick --output /tmp/rmc.md
"""

import argparse
import dataclasses
import math
import os
import resource
import subprocess
import sys
import time
import types

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

from keras_relrec.datasets import nth_farthest  # noqa: E402
from keras_relrec.layers import RelationalMemoryCell  # noqa: E402

SECTION = "bench_relational_memory"
# The last commit before the gating rewrite that part 4 measures (the one
# before it, the attention rewrite, was measured against a2e536d).
BASELINE_REF = "02337c3"
NUM_CLASSES = 8
# The cell arguments every configuration starts from (the cell's defaults,
# spelled out so the table does not depend on them staying the same).
CELL_DEFAULTS = {"num_blocks": 1, "attention_mlp_layers": 2, "gate_style": "unit"}
# Part 3: (label, cell arguments changed from the configuration's own).
ABLATIONS = [
    ("as configured", {}),
    ("num_blocks=2", {"num_blocks": 2}),
    ("attention_mlp_layers=1", {"attention_mlp_layers": 1}),
    ("gate_style=None", {"gate_style": None}),
]


@dataclasses.dataclass(frozen=True)
class Spec:
    """One benchmarked model; equal specs are built and timed only once,
    so a variant shared by several parts (e.g. the small configuration at
    4 slots) costs one compile and one set of samples."""

    model: str  # "rmc" or "lstm"
    batch: int
    seq_len: int
    features: int
    jit: bool
    data: str = "random"  # or "nth_farthest"
    cell: tuple = ()  # RMC arguments, sorted (name, value) pairs
    units: int = 0  # LSTM units
    version: str = ""  # git commit of the RMC's code; "" for this checkout

    @property
    def cell_kwargs(self):
        return dict(self.cell)


def rmc_spec(config, jit, **changes):
    cell = {**CELL_DEFAULTS, **config["cell"], **changes}
    return Spec("rmc", config["batch"], config["seq_len"], config["features"], jit,
                config["data"], tuple(sorted(cell.items())))


def configurations(args):
    """The two configurations of part 1; part 2 scales the small one.

    The paper trained a much larger memory on GPU. Sonnet's
    `rmc_nth_farthest.py` example uses head_size 2048 and 4 slots and, as
    written, passes its slot count as num_heads and num_blocks too: slots
    8192 wide, 4 blocks, batch 1600, about 95 TFLOP per forward pass by
    `forward_flops`, i.e. minutes per step on this CPU. So the paper's rows
    are paired with a memory that fits a CPU: 8 slots x 8 heads x 64 (512
    wide).
    """
    if args.quick:
        # Sonnet's reduced task (4 objects of 4 features: rows 16 wide) with a
        # tiny memory, and the same for both configurations: equal specs are
        # built once, which keeps this smoke test's compiles (seconds each,
        # whatever the size) few.
        paper = {"batch": 4, "seq_len": 4, "features": 16, "data": "nth_farthest",
                 "cell": {"mem_slots": 2, "num_heads": 2, "head_size": 4}}
        small = paper
    else:
        paper = {"batch": 32, "seq_len": 8, "features": 40, "data": "nth_farthest",
                 "cell": {"mem_slots": 8, "num_heads": 8, "head_size": 64}}
        small = {"batch": 32, "seq_len": 8, "features": 16, "data": "random",
                 "cell": {"mem_slots": 4, "num_heads": 2, "head_size": 32}}
    return {"paper-ish": paper, "small": small}


def make_data(spec):
    """(x, y) for a spec: the Nth-farthest generator where asked for and the
    shapes fit it (T objects, rows features + 3T wide), so the paper
    configuration sees the task's real inputs; random rows otherwise (a
    sweep changing T). The values do not change the work done, only the
    shapes do."""
    objects_features = spec.features - 3 * spec.seq_len
    if spec.data == "nth_farthest" and objects_features > 0:
        return nth_farthest(spec.batch, num_objects=spec.seq_len,
                            num_features=objects_features, seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((spec.batch, spec.seq_len, spec.features), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, spec.batch).astype(np.int32)
    return x, y


CELL_PATH = "keras_relrec/layers/relational/relational_memory_cell.py"
_CELL_VERSIONS = {}


def cell_class(version):
    """`RelationalMemoryCell` as this checkout has it, or as commit
    `version` had it (read with `git show`, so both are timed in one run)."""
    if not version:
        return RelationalMemoryCell
    if version not in _CELL_VERSIONS:
        source = subprocess.run(
            ["git", "-C", _HERE, "show", f"{version}:{CELL_PATH}"],
            capture_output=True, text=True, check=True).stdout
        # Keras refuses a second class under the same registered name; the
        # old version is only timed, never serialized.
        source = source.replace("@register_layer\n", "")
        module = types.ModuleType(f"relational_memory_cell_{version}")
        exec(compile(source, f"{version}:{CELL_PATH}", "exec"), module.__dict__)
        _CELL_VERSIONS[version] = module.RelationalMemoryCell
    return _CELL_VERSIONS[version]


def recurrent_layer(spec):
    if spec.model == "lstm":
        return keras.layers.LSTM(spec.units)
    return keras.layers.RNN(cell_class(spec.version)(**spec.cell_kwargs))


def rmc_params(spec):
    """Parameters of the RMC's recurrent layer alone (no Dense head), from a
    built but never compiled layer: what the matched LSTM must equal."""
    layer = recurrent_layer(spec)
    layer.build((None, spec.seq_len, spec.features))
    return layer.count_params()


def matched_lstm_units(params, features):
    """U with 4·(D·U + U·U + U) closest to `params`: the positive root of
    U² + (D + 1)·U − params/4 = 0, rounded."""
    b = features + 1
    return max(1, round((-b + math.sqrt(b * b + params)) / 2))


def prepare(spec, warmup):
    """A compiled model with warmed-up (traced, and for jit XLA-compiled)
    train and inference callables. `train_on_batch`/`predict_on_batch`
    return NumPy values, so each call waits for its result.

    Seeding happens once, in `main`: `tf.random.set_seed` (which Keras'
    `set_random_seed` calls) makes every existing tf.function retrace, so
    seeding here would recompile the models prepared before this one during
    their timed calls."""
    x, y = make_data(spec)
    inputs = keras.Input((spec.seq_len, spec.features))
    rnn = recurrent_layer(spec)
    model = keras.Model(inputs, keras.layers.Dense(NUM_CLASSES)(rnn(inputs)))
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # Explicit: "auto" means no XLA on CPU TF.
        jit_compile=spec.jit,
    )
    train = lambda: model.train_on_batch(x, y)  # noqa: E731
    infer = lambda: model.predict_on_batch(x)  # noqa: E731
    t0 = time.perf_counter()
    for _ in range(warmup):
        train(), infer()
    return {
        "train": train,
        "infer": infer,
        # Keras may silently drop jit; report what actually ran.
        "effective_jit": bool(model.jit_compile),
        "params": rnn.count_params(),
        "warmup_s": time.perf_counter() - t0,
    }


def rmc_flop_parts(spec):
    """Matmul FLOPs of one forward pass of the RMC over the sequence, split
    like the ablations of part 3 (keys of `COMPONENTS`)."""
    b, t, din = spec.batch, spec.seq_len, spec.features
    c = spec.cell_kwargs
    n, h, v = c["mem_slots"], c["num_heads"], c["head_size"]
    k = c.get("key_size") or v
    d, rows, blocks = h * v, b * (n + 1), c["num_blocks"]
    g = {"unit": d, "memory": 1, None: 0}[c["gate_style"]]
    return {
        # qkv projection, then q·kᵀ and A·v.
        "attention": t * blocks * (2 * rows * d * h * (2 * k + v)
                                   + 2 * b * h * (n + 1) ** 2 * (k + v)),
        "mlp": t * blocks * c["attention_mlp_layers"] * 2 * rows * d * d,
        # Memory rows (N per example) and the projected input each map to
        # 2g gate columns.
        "gates": t * (2 * b * n * d * 2 * g + 2 * b * d * 2 * g),
        "rest": t * 2 * b * din * d,  # input projection
    }


def forward_flops(spec):
    """Matmul FLOPs of one forward pass over the sequence (recurrent layer
    only); explains why equal parameters do not mean equal time: the RMC
    applies its weights to N + 1 rows per example, the LSTM to one."""
    if spec.model == "lstm":
        return 2 * spec.batch * (spec.features + spec.units) * 4 * spec.units * spec.seq_len
    return sum(rmc_flop_parts(spec).values())


def analytic_memory(spec):
    """(attention weights of one step, forward activations of one sequence),
    in bytes of float32.

    Activations count every tensor the step's formulas produce (see the
    cell's docstring): per block the qkv projection and its norm, the logits
    and softmax, the attended rows, residual and norm twice, and the MLP's
    outputs and ReLUs; then the gate path. That is roughly what backprop
    keeps (an upper bound: XLA may fuse or recompute some of it)."""
    c = spec.cell_kwargs
    b, n, h, v = spec.batch, c["mem_slots"], c["num_heads"], c["head_size"]
    k = c.get("key_size") or v
    d, rows, lay = h * v, b * (n + 1), c["attention_mlp_layers"]
    attention = b * h * (n + 1) ** 2
    block = (2 * rows * h * (2 * k + v) + 2 * attention + rows * d
             + 2 * rows * d + (2 * lay - 1) * rows * d + 2 * rows * d)
    g = {"unit": d, "memory": 1, None: 0}[c["gate_style"]]
    gates = 0 if c["gate_style"] is None else 5 * b * n * d + 6 * b * n * g
    per_step = b * d + rows * d + c["num_blocks"] * block + gates
    return 4 * attention, 4 * per_step * spec.seq_len


def peak_rss_mib():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def plan(args):
    """Every spec the run needs, and what each part reads from it."""
    configs = configurations(args)
    part1 = []  # (config name, jit, rmc spec, lstm spec)
    for name, config in configs.items():
        # jit does not change the weights: one count serves both settings.
        units = matched_lstm_units(rmc_params(rmc_spec(config, False)), config["features"])
        for jit in (False, True):
            rmc = rmc_spec(config, jit)
            lstm = dataclasses.replace(rmc, model="lstm", cell=(), units=units)
            part1.append((name, jit, rmc, lstm))

    small = configs["small"]
    scaling_jits = (True, False) if args.scaling_jit == "both" else (args.scaling_jit == "true",)
    slots = [(s, {jit: rmc_spec(small, jit, mem_slots=s) for jit in scaling_jits})
             for s in args.slots]
    lengths = []
    for t in args.lengths:
        config = {**small, "seq_len": t}
        lengths.append((t, {jit: rmc_spec(config, jit, mem_slots=args.length_slots)
                            for jit in scaling_jits}))

    profile_jit = args.profile_jit == "true"
    ablations = [(name, [(label, rmc_spec(config, profile_jit, **changes))
                         for label, changes in ABLATIONS])
                 for name, config in configs.items()]
    # Part 4: (config name, jit, before, after); after is part 1's spec.
    versions_jits = (False, True) if args.versions_jit == "both" else (args.versions_jit == "true",)
    versions = [(name, jit, dataclasses.replace(rmc, version=args.baseline_ref), rmc)
                for name, jit, rmc, _ in part1 if jit in versions_jits]
    return {"configs": configs, "part1": part1, "slots": slots, "lengths": lengths,
            "scaling_jits": scaling_jits, "profile_jit": profile_jit,
            "ablations": ablations, "versions": versions}


def measure(p, args):
    """Prepares every distinct spec and times them all in one round robin.

    Returns {(spec, "train" | "infer"): median seconds} and {spec: prepared}.
    Inference is sampled only where a table shows it (not for ablations).
    """
    wanted = {}  # insertion-ordered set of (spec, kind)
    for _, _, rmc, lstm in p["part1"]:
        for spec in (rmc, lstm):
            wanted[(spec, "train")] = wanted[(spec, "infer")] = None
    for _, by_jit in p["slots"] + p["lengths"]:
        for spec in by_jit.values():
            wanted[(spec, "train")] = wanted[(spec, "infer")] = None
    for _, variants in p["ablations"]:
        for _, spec in variants:
            wanted[(spec, "train")] = None
    for _, _, before, after in p["versions"]:
        for spec in (before, after):
            wanted[(spec, "train")] = wanted[(spec, "infer")] = None

    return prepare_and_time(wanted, lambda spec: prepare(spec, args.warmup), describe,
                            args.repeats)


def describe(spec):
    if spec.model == "lstm":
        what = f"LSTM({spec.units})"
    else:
        c = spec.cell_kwargs
        what = (f"RMC(N={c['mem_slots']}, H={c['num_heads']}, V={c['head_size']}, "
                f"blocks={c['num_blocks']}, mlp={c['attention_mlp_layers']}, "
                f"gate={c['gate_style']})")
    version = f" @{spec.version}" if spec.version else ""
    return (f"{what}{version} B={spec.batch} T={spec.seq_len} D={spec.features} "
            f"jit={spec.jit}")


def jit_label(spec, prepared):
    # Flags a jit request Keras quietly did not honour.
    ok = prepared[spec]["effective_jit"] == spec.jit
    return str(spec.jit) + ("" if ok else " (off!)")


COMPONENTS = {
    "attention": "attention (qkv projection, norms, softmax, A·v)",
    "mlp": "MLP",
    "gates": "gates",
    "rest": "rest (input projection, loop, head, loss, Adam)",
}


def ablation_shares(times, layers):
    """Splits the configured step into `COMPONENTS`, assuming costs add up:
    an extra block costs one attention pass plus one MLP pass (the MLP's
    weights are shared, its pass is not), dropping an MLP layer saves one
    layer, and dropping the gates saves the gate path."""
    base = times["as configured"]
    mlp = layers * (base - times["attention_mlp_layers=1"])
    attention = (times["num_blocks=2"] - base) - mlp
    gates = base - times["gate_style=None"]
    return base, {"attention": attention, "mlp": mlp, "gates": gates,
                  "rest": base - mlp - attention - gates}


def render(args, p, med, prepared, rss):
    lines = section_header("Relational memory core: cost, scaling, profile "
                           "(`bench_relational_memory.py`)", args.quick)
    paper, small = p["configs"]["paper-ish"], p["configs"]["small"]

    def cfg(c):
        cell = c["cell"]
        return (f"batch {c['batch']}, length {c['seq_len']}, rows {c['features']} wide, "
                f"{cell['mem_slots']} slots x {cell['num_heads']} heads x "
                f"{cell['head_size']} (memory {cell['num_heads'] * cell['head_size']} "
                f"wide), 1 block, 2 MLP layers, unit gates")

    def inputs(c):
        if c["data"] == "nth_farthest":
            return "Nth-farthest inputs from `keras_relrec.datasets.nth_farthest`"
        return "random inputs and labels"

    lines += [
        f"- Model: `Input((T, D)) -> RNN(cell) -> Dense({NUM_CLASSES})`, Adam, sparse "
        "categorical cross-entropy from logits; one `train_on_batch` / "
        "`predict_on_batch` call timed; median of "
        f"{args.repeats} rounds, every variant of the run timed once per round "
        f"(round robin), after {args.warmup} warm-up call(s)",
        f"- Paper-ish: {cfg(paper)}; {inputs(paper)}. The paper's memory is "
        "far too large for a CPU, and so is that of Sonnet's "
        "`rmc_nth_farthest.py` example (head_size 2048, 4 slots, and, as "
        "written, 4 heads and 4 blocks, since it passes its slot count on; "
        "batch 1600: about 95 TFLOP per forward pass), so the full run uses "
        "8 slots x 8 heads x 64 with the paper's rows (8 objects of 16 "
        "features).",
        f"- Small: {cfg(small)}; {inputs(small)}",
        "",
        "### 1. RMC vs `keras.layers.LSTM` with about as many parameters",
        "",
        "LSTM units U solve 4·(D·U + U² + U) ≈ the RMC layer's parameters. "
        "Fwd GFLOP: matmuls of one forward pass over the batch (the RMC applies "
        "its weights to N + 1 rows per example, the LSTM to one).",
        "",
        "| Config | Model | Params | jit | Fwd GFLOP | Train ms | Infer ms "
        "| Train RMC/LSTM | Infer RMC/LSTM |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, _, rmc, lstm in p["part1"]:
        train_ratio = med[(rmc, "train")] / med[(lstm, "train")]
        infer_ratio = med[(rmc, "infer")] / med[(lstm, "infer")]
        for spec, label in ((rmc, "RMC"), (lstm, f"LSTM({lstm.units})")):
            ratios = (f"{train_ratio:.2f}x | {infer_ratio:.2f}x" if spec is rmc else " | ")
            lines.append(
                f"| {name} | {label} | {prepared[spec]['params']:,} | "
                f"{jit_label(spec, prepared)} | {forward_flops(spec) / 1e9:.3g} | "
                f"{med[(spec, 'train')] * 1e3:.2f} | {med[(spec, 'infer')] * 1e3:.2f} | "
                f"{ratios} |")

    jits = p["scaling_jits"]
    time_heads = " | ".join(f"Train ms jit={j} | Infer ms jit={j}" for j in jits)
    lines += [
        "",
        "### 2. Scaling (small configuration)",
        "",
        "Memory is analytic, float32: *Attention* is one step's attention "
        "weights, B·H·(N+1)²·4 bytes; *Activations* every tensor the forward "
        "pass of one sequence produces (what backprop may keep; XLA can fuse "
        "some away). Per-point peak RSS was not measured: TF allocations are "
        "invisible to `tracemalloc`, the process's RSS peak mixes all points "
        "and their compiles, and a subprocess per point would cost a TF import "
        "and compile each. The run's overall peak RSS was "
        f"{rss['end']:.0f} MiB ({rss['start']:.0f} MiB after importing TF).",
        "",
    ]

    def scaling_table(title, rows):
        out = [f"| {title} | Params | {time_heads} | Attention KiB | Activations MiB |",
               "|---:|---:|" + "---:|" * (2 * len(jits)) + "---:|---:|"]
        for value, by_jit in rows:
            any_spec = by_jit[jits[0]]
            attention, activations = analytic_memory(any_spec)
            times = " | ".join(f"{med[(by_jit[j], 'train')] * 1e3:.2f} | "
                               f"{med[(by_jit[j], 'infer')] * 1e3:.2f}" for j in jits)
            out.append(f"| {value} | {prepared[any_spec]['params']:,} | {times} | "
                       f"{attention / 1024:.1f} | {activations / 2**20:.2f} |")
        return out

    lines += scaling_table(f"mem_slots (length {small['seq_len']})", p["slots"])
    lines += [""]
    lines += scaling_table(f"Length (mem_slots {args.length_slots})", p["lengths"])
    lines += _scaling_summary(p, med, jits)

    lines += [
        "",
        "### 3. Where an RMC training step goes (ablations, "
        f"jit={p['profile_jit']})",
        "",
        "Each variant changes one argument of the configuration; the shares "
        "assume costs add up (an extra block = one attention pass + one MLP "
        "pass). Differences of noisy medians: small or negative shares mean "
        "\"within noise\".",
        "",
        "| Config | Variant | Train ms |",
        "|---|---|---:|",
    ]
    verdicts = []
    share_lines = ["", "Measured shares against the matmul FLOPs of the same "
                   "forward pass (*rest* counts only the input projection "
                   "there; the loop, head, loss and optimizer do no large "
                   "matmuls):", "",
                   "| Config | Component | ms | Share of step | Share of FLOPs |",
                   "|---|---|---:|---:|---:|"]
    for name, variants in p["ablations"]:
        times = {}
        for label, spec in variants:
            times[label] = med[(spec, "train")]
            lines.append(f"| {name} | {label} | {times[label] * 1e3:.2f} |")
        base_spec = variants[0][1]
        base, parts = ablation_shares(times, base_spec.cell_kwargs["attention_mlp_layers"])
        flops = rmc_flop_parts(base_spec)
        for key, label in COMPONENTS.items():
            share_lines.append(
                f"| {name} | {label} | {parts[key] * 1e3:.2f} | "
                f"{100 * parts[key] / base:.0f}% | "
                f"{100 * flops[key] / sum(flops.values()):.0f}% |")
        top = max(parts, key=parts.get)
        verdicts.append(f"- {name}: the biggest cost of a training step is "
                        f"**{COMPONENTS[top]}**, about {100 * parts[top] / base:.0f}% "
                        f"of {base * 1e3:.2f} ms.")
    lines += share_lines + [""] + verdicts
    lines += _versions_table(args, p, med)
    return "\n".join(lines)


def _versions_table(args, p, med):
    """Part 4: the RMC of commit `--baseline-ref` against this checkout's."""
    out = [
        "",
        f"### 4. Before and after the gating rewrite (`{args.baseline_ref}` → this checkout)",
        "",
        "The rewrite computes the gates on 2-D (batch·N, D) rows instead of "
        "(batch, N, D): XLA on CPU reduced the candidate's bias gradient "
        "(the last layer norm's beta) over the two leading axes of the 3-D "
        "tensor in a strided loop, about 30 ms of a 410 ms paper-size "
        "training step in the XLA profile, and over one axis of the 2-D rows "
        "it takes its fast column reduction. The two gates are split with one "
        "`split` instead of two slices (one concatenation in the gradient "
        "instead of two zero-padded halves summed). Same equations. Both "
        "versions timed in the same round robin.",
        "",
        "| Config | jit | Train ms before | Train ms after | Train after/before "
        "| Infer ms before | Infer ms after | Infer after/before |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, jit, before, after in p["versions"]:
        cells = []
        for kind in ("train", "infer"):
            b, a = med[(before, kind)], med[(after, kind)]
            cells.append(f"{b * 1e3:.2f} | {a * 1e3:.2f} | {a / b:.2f}x")
        out.append(f"| {name} | {jit} | {' | '.join(cells)} |")
    return out


def _scaling_summary(p, med, jits):
    """One line per sweep: how much the time grows from its first to its
    last point, against the growth of the work (rows per step for slots,
    steps for length), so superlinear costs stand out."""
    out = [""]
    jit = jits[0]
    for label, rows, work in (
        ("mem_slots", p["slots"], lambda spec: spec.cell_kwargs["mem_slots"] + 1),
        ("length", p["lengths"], lambda spec: spec.seq_len),
    ):
        if len(rows) < 2:
            continue
        first, last = rows[0][1][jit], rows[-1][1][jit]
        out.append(
            f"- {label} {rows[0][0]} → {rows[-1][0]} (jit={jit}): training "
            f"{med[(last, 'train')] / med[(first, 'train')]:.1f}x, inference "
            f"{med[(last, 'infer')] / med[(first, 'infer')]:.1f}x slower, for "
            f"{work(last) / work(first):.1f}x the "
            f"{'rows per step' if label == 'mem_slots' else 'steps'}.")
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=20, help="timed rounds (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first")
    p.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64],
                   help="mem_slots of the slot sweep")
    p.add_argument("--lengths", type=int, nargs="+", default=[8, 32, 128],
                   help="sequence lengths of the length sweep")
    p.add_argument("--length-slots", type=int, default=4,
                   help="mem_slots of the length sweep")
    # Defaults resolved below: --quick leaves XLA out of the sweeps, the
    # ablations and part 4, because an XLA compile costs several seconds even
    # for a tiny model and part 1 already exercises jit_compile=True.
    p.add_argument("--scaling-jit", choices=["true", "false", "both"], default=None,
                   help="jit_compile settings of the sweeps (default both; "
                   "false with --quick)")
    p.add_argument("--profile-jit", choices=["true", "false"], default=None,
                   help="jit_compile of the ablations (default true; false "
                   "with --quick)")
    p.add_argument("--versions-jit", choices=["true", "false", "both"], default=None,
                   help="jit_compile settings of part 4 (default both; false "
                   "with --quick)")
    p.add_argument("--baseline-ref", default=BASELINE_REF,
                   help="git commit whose RMC part 4 compares against")
    results_file.add_common_arguments(p, "tiny sizes and 2 repeats, for smoke tests")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.warmup = 2, 1
        # Two points per sweep, each sharing one with part 1 (2 slots,
        # length 4): two more models to build and trace, not three.
        args.slots, args.lengths, args.length_slots = [1, 2], [4, 8], 2
    if args.scaling_jit is None:
        args.scaling_jit = "false" if args.quick else "both"
    if args.profile_jit is None:
        args.profile_jit = "false" if args.quick else "true"
    if args.versions_jit is None:
        args.versions_jit = "false" if args.quick else "both"
    return args


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(0)
    rss = {"start": peak_rss_mib()}
    t0 = time.perf_counter()
    p = plan(args)
    med, prepared = measure(p, args)
    rss["end"] = peak_rss_mib()
    section = write_section(args.output, SECTION, render(args, p, med, prepared, rss))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
