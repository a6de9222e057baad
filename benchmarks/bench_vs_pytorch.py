"""Our layers against the PyTorch code people would use instead, on CPU.

Each row is the same work on both sides, the weights copied across where
the function is the same (checked before timing: the outputs must agree
within 1e-4, or the run stops):

1. **Transformer-XL generation**, batch 1, per new token, greedy, one
   token per step from the memories: 2 layers, d = 64, 4 heads of 16,
   d_inner = 256 and 6 layers, d = 256, 8 heads of 32, d_inner = 1,024, at
   memories of 512 and 2,048 positions, vocabulary 256; and batch 8 of the
   6-layer model at memory 512 (tokens per second). Ours:
   `TransformerXLGenerator(backbone, head).generate(prompt,
   max_new_tokens=N)` (`TransformerXL(segment_len=1, mem_len=M)`, a
   `Dense` head) on TensorFlow and on JAX; the time of one call over N
   (one-token prompt: N + 1 steps). PyTorch: HuggingFace
   `TransfoXLLMHeadModel` (transformers 4.35; `cutoffs=[]`, `div_val=1`:
   one plain softmax over the vocabulary; `clamp_len=-1`,
   `same_length=False`, `untie_r=True`, dropout 0), the loop people write
   under `torch.no_grad()`: feed the token with `mems`, take the argmax of
   the last position, feed it back (N + 1 forward calls; not
   `model.generate`), eager and under `torch.compile`. HF starts from
   `mems=None`, i.e. M zero positions it attends, so every one of its
   steps does the work of a full memory, as ours does (our memory always
   has M slots, masked until filled). Check: our importer
   (`keras_relrec.migrate.load_hf_transfo_xl`) loads HF's weights; the
   log-probabilities of a 16-token prompt from an empty memory and the 8
   greedy tokens that follow must agree.
2. **Transformer-XL training**, one segment: 6 layers as above, batch 8,
   segment 128, memory 128 (given, no gradient): forward, backward and
   an Adam step. Ours: a Keras model of tokens and memories to logits,
   `train_on_batch` with `jit_compile` False (graph) and True (XLA);
   PyTorch: the HF model with `labels`, eager and compiled. Check: the
   log-probabilities of the segment from the same memories.
3. **Relational memory core training step**, batch 32, 8 steps: the
   paper-sized memory (8 slots, 8 heads of 64, rows 40 wide) and a small
   one (4 slots, 2 heads of 32, rows 16 wide), then `Dense(8)` and cross-
   entropy, Adam. Ours: `RNN(RelationalMemoryCell(...))`, graph and XLA
   on TensorFlow, XLA on JAX, each compiled also with the steps unrolled
   (`RNN(unroll=True)`).
   PyTorch: `RelationalMemory` of the L0SG port
   (`relational_rnn_general.py`; one line changed as it loads: its
   in-place `q *=` on a view, which current torch refuses, made out of
   place), eager and compiled. Not the same
   function, so not checked: the port's layer norms run over all slots
   and features at once (`nn.LayerNorm([slots + 1, width])`) and its MLP
   applies one `Linear` twice (`[nn.Linear(...)] * 2`), where Sonnet and
   ours normalise each row and have two layers; the work is the same.
4. **R-Transformer block training at T = 3,000**, batch 1, d = 64, 4
   heads, window 8, one local GRU layer: forward, backward (mean squared
   error) and an Adam step; time and peak memory. Ours: `RTransformerBlock`
   (graph, XLA; each also with `chunk_size=128`); PyTorch: `Block` of DSE-MSU/R-transformer
   (`models/RTransformer.py`, its `.cuda()` calls made no-ops), eager and
   compiled. Check: the block's outputs, weights loaded with
   `keras_relrec.migrate.load_r_transformer_block`. Memory: each variant
   in a fresh process: after one warm-up step (tracing, compiling) its
   resident-set high-water mark is reset (`/proc/self/clear_refs`), two
   steps run, and we report `VmHWM` (`/proc/self/status`) and its rise
   over the resident set measured before the first step (model, weights,
   data and the runtime itself excluded; what tracing and compiling keep,
   e.g. XLA's program, included) and over the one after the warm-up step
   (what the steady steps add beyond what the first one left allocated).

How: the driver (this script, our environment) starts one worker process
per side and keeps it: ours on TensorFlow, ours on JAX (Keras' backend is
fixed at import) and the peer in the reference environment (torch and
transformers; `--reference-python`, or $REFERENCE_PYTHON, default
`.venv-reference/bin/python`: `make .venv-reference/.installed`). They
talk one JSON command per line over stdin/stdout, arrays through .npz
files in a temporary folder. Every variant is warmed up (compiled), then
timed in rounds, one variant after another in every round (ours, peer,
ours, peer, ...), each sample one untimed call then one timed call inside
its worker; medians of `--repeats` rounds. Ratio > 1: ours faster (best
PyTorch mode ÷ best of ours). Each library's default threads, or
`--threads N` on every side (on a machine shared with other work, torch's
spinning OpenMP threads slowed tiny steps a hundredfold at a load of 8 on
2 cores: one thread each is the fairer measure there).

The peers' code is not shipped: give checkouts,
    RMC_PYTORCH=<checkout of https://github.com/L0SG/relational-rnn-pytorch>
    R_TRANSFORMER=<checkout of https://github.com/DSE-MSU/R-transformer>
(or `--rmc-pytorch`, `--r-transformer`); a full run stops if one is
missing. `--only` runs some rows (txl-gen, txl-train, rmc, rt).

Results go to the `bench_vs_pytorch` section of benchmarks/RESULTS.md.
Full run (45 minutes on 2 cores shared with other work, a third of it compiling):
    make bench-peers RMC_PYTORCH=... R_TRANSFORMER=...
    python benchmarks/bench_vs_pytorch.py
Smoke test (tiny sizes, no torch.compile):
    python benchmarks/bench_vs_pytorch.py --quick --output /tmp/peers.md
"""

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import results_file  # noqa: E402
from results_file import reset_peak  # noqa: E402
from results_file import rss_kib  # noqa: E402

SECTION = "bench_vs_pytorch"
ROOT = os.path.dirname(_HERE)
WORKER = "--worker"
ROWS = ("txl-gen", "txl-train", "rmc", "rt")
ATOL = 1e-4
RMC_URL = "https://github.com/L0SG/relational-rnn-pytorch"
RT_URL = "https://github.com/DSE-MSU/R-transformer"
VOCABULARY = 256
NUM_CLASSES = 8


def worker_side():
    """'ours-tf', 'ours-jax' or 'peer' in a worker process; None in the driver."""
    return sys.argv[sys.argv.index(WORKER) + 1] if WORKER in sys.argv else None


# ----------------------------------------------------------------------------
# Sizes


def sizes(quick):
    if quick:
        tiny = {"layers": 1, "d": 16, "heads": 2, "head_size": 8, "inner": 32}
        return {
            "gen": [dict(tiny, name="tiny", mem=16, batch=1), dict(tiny, name="tiny", mem=16, batch=2)],
            "gen_tokens": 4,
            "train": dict(tiny, batch=2, segment=8, mem=8),
            "rmc": [{"name": "tiny", "batch": 4, "steps": 4, "features": 6, "mem_slots": 2, "num_heads": 2,
                     "head_size": 4}],
            "rt": {"steps": 50, "batch": 1, "d": 8, "heads": 2, "window": 3, "local_layers": 1},
        }
    small = {"layers": 2, "d": 64, "heads": 4, "head_size": 16, "inner": 256}
    large = {"layers": 6, "d": 256, "heads": 8, "head_size": 32, "inner": 1024}
    gen = [dict(size, name=name, mem=mem, batch=1)
           for name, size in (("2 × 64", small), ("6 × 256", large)) for mem in (512, 2048)]
    gen.append(dict(large, name="6 × 256", mem=512, batch=8))
    return {
        "gen": gen,
        "gen_tokens": 64,
        "train": dict(large, batch=8, segment=128, mem=128),
        "rmc": [{"name": "paper (8 slots × 8 heads × 64)", "batch": 32, "steps": 8, "features": 40,
                 "mem_slots": 8, "num_heads": 8, "head_size": 64},
                {"name": "small (4 slots × 2 heads × 32)", "batch": 32, "steps": 8, "features": 16,
                 "mem_slots": 4, "num_heads": 2, "head_size": 32}],
        "rt": {"steps": 3000, "batch": 1, "d": 64, "heads": 4, "window": 8, "local_layers": 1},
    }


# ----------------------------------------------------------------------------
# Worker side: a loop of JSON commands; each setup returns callables to time.


def serve(side, folder):
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    # Anything a library prints goes to stderr, not into the protocol.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    setups = PEER_SETUPS if side == "peer" else OURS_SETUPS
    if side == "peer":
        set_torch_threads()
        import torch

        # Each row compiles from scratch (static shapes, its own graph
        # breaks counted), not from the graphs of the rows before it.
        setups = {kind: (lambda spec, folder, weights, setup=setup:
                         (torch._dynamo.reset(), setup(spec, folder, weights))[1])
                  for kind, setup in setups.items()}
    objects, counter = {}, 0
    for line in sys.stdin:
        message = json.loads(line)
        command = message["cmd"]
        try:
            if command == "quit":
                break
            if command == "versions":
                reply = versions(side)
            elif command == "setup":
                counter += 1
                built = setups[message["kind"]](message["spec"], folder, message.get("weights"))
                objects[counter] = built
                check = None
                if built.get("check") is not None:
                    import numpy as np

                    check = os.path.join(folder, f"{side}-check-{counter}.npz")
                    np.savez(check, **built["check"])
                reply = {"id": counter, "variants": list(built["variants"]), "check": check,
                         "weights": built.get("weights"), "info": built.get("info", {})}
            elif command == "warm":
                fn = objects[message["id"]]["variants"][message["variant"]]
                breaks = graph_breaks(side)
                t0 = time.perf_counter()
                fn()
                first = time.perf_counter() - t0
                for _ in range(message.get("n", 1) - 1):
                    fn()
                reply = {"first_s": first, "graph_breaks": graph_breaks(side) - breaks}
            elif command == "time":
                fn = objects[message["id"]]["variants"][message["variant"]]
                fn()  # results_file.rewarmed: once untimed, then timed
                reply = {"seconds": results_file.time_once(fn)}
            elif command == "memory":
                fn = objects[message["id"]]["variants"][message["variant"]]
                before = rss_kib("VmRSS")
                fn()
                warm = rss_kib("VmRSS")
                reset = reset_peak()
                for _ in range(message.get("steps", 2)):
                    fn()
                reply = {"before_kib": before, "warm_kib": warm, "peak_kib": rss_kib("VmHWM"), "reset": reset}
            elif command == "drop":
                objects.pop(message["id"], None)
                gc.collect()
                reply = {}
            else:
                raise ValueError(f"unknown command {command!r}")
        except Exception as error:  # reported to the driver, which decides
            reply = {"error": results_file.one_line(error), "traceback": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")


def graph_breaks(side):
    """torch.compile's graph breaks so far (0 outside the peer)."""
    if side != "peer" or "torch" not in sys.modules:
        return 0
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def versions(side):
    import importlib.metadata

    if side == "peer":
        import torch
        import transformers

        return {"torch": torch.__version__, "transformers": transformers.__version__,
                "python": sys.version.split()[0], "threads": torch.get_num_threads()}
    import keras

    return {"keras": keras.__version__, "backend": keras.backend.backend(),
            "jax": importlib.metadata.version("jax") if side == "ours-jax" else None}


def thread_environment(threads):
    """Environment variables that give every side `threads` threads (None:
    each library's default)."""
    if not threads:
        return {}
    n = str(threads)
    environment = {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "TF_NUM_INTRAOP_THREADS": n,
                   "TF_NUM_INTEROP_THREADS": n}
    if threads == 1:
        environment["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return environment


def set_torch_threads():
    threads = int(os.environ.get("BENCH_THREADS", "0"))
    if threads:
        import torch

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)


# --- peer (PyTorch) ---------------------------------------------------------


def hf_model(spec, weights_folder):
    import torch
    from transformers import TransfoXLConfig
    from transformers import TransfoXLLMHeadModel

    config = TransfoXLConfig(
        vocab_size=VOCABULARY, cutoffs=[], d_model=spec["d"], d_embed=spec["d"], n_head=spec["heads"],
        d_head=spec["head_size"], d_inner=spec["inner"], div_val=1, n_layer=spec["layers"], mem_len=spec["mem"],
        clamp_len=-1, same_length=False, adaptive=False, dropout=0.0, dropatt=0.0, untie_r=True,
        pre_lnorm=False, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = TransfoXLLMHeadModel(config)
    with torch.no_grad():
        # HF's init (std 0.02) leaves every log-probability near uniform,
        # where a greedy choice could flip on rounding: logits of std ~2.
        head = model.crit.out_layers[0]
        head.weight.normal_(0.0, 2.0 / spec["d"] ** 0.5)
        head.bias.normal_(0.0, 0.1)
    import numpy as np

    path = os.path.join(weights_folder, f"transfo_xl_{os.getpid()}_{id(model)}.npz")
    np.savez(path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
    return model, path


def training_variants(module, loss, optimizer, compile):
    """{"eager": step, "compile": step}: one training step (the loss, its
    backward pass, the optimizer's step) with `module` as it is and under
    `torch.compile` (with `compile` only); `loss(forward)` computes the
    loss with `forward` in the module's place."""
    import torch

    def step(forward):
        value = loss(forward)
        value.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return value.item()

    variants = {"eager": lambda: step(module)}
    if compile:
        compiled = torch.compile(module)
        variants["compile"] = lambda: step(compiled)
    return variants


def peer_txl_gen(spec, folder, _weights):
    import numpy as np
    import torch

    model, path = hf_model(spec, folder)
    model.eval()
    layers, d = spec["layers"], spec["d"]
    prompt = torch.from_numpy(np.asarray(spec["check_prompt"], np.int64))

    def greedy(forward, tokens, mems, new_tokens):
        """The prompt, then `new_tokens` greedy tokens: N + 1 forward calls."""
        out = []
        with torch.no_grad():
            result = forward(input_ids=tokens, mems=mems)
            for _ in range(new_tokens):
                token = result.prediction_scores[:, -1].argmax(-1, keepdim=True)
                out.append(token)
                result = forward(input_ids=token, mems=result.mems)
        return torch.cat([tokens, *out], dim=1)

    with torch.no_grad():
        empty = [torch.zeros(0, prompt.shape[0], d) for _ in range(layers)]
        log_probs = model(input_ids=prompt, mems=empty).prediction_scores.numpy()
        tokens = greedy(model, prompt, empty, spec["check_tokens"]).numpy()
    start = torch.zeros((spec["batch"], 1), dtype=torch.int64)
    n = spec["tokens"]
    variants = {"eager": lambda: greedy(model, start, None, n)}
    if spec["compile"]:
        compiled = torch.compile(model)
        variants["compile"] = lambda: greedy(compiled, start, None, n)
    return {"variants": variants, "weights": path, "check": {"log_probs": log_probs, "tokens": tokens},
            "info": {"params": sum(p.numel() for p in model.parameters())}}


def peer_txl_train(spec, folder, _weights):
    import numpy as np
    import torch

    model, path = hf_model(spec, folder)
    rng = np.random.default_rng(0)
    tokens = torch.from_numpy(rng.integers(0, VOCABULARY, (spec["batch"], spec["segment"])))
    mems_np = rng.normal(size=(spec["layers"], spec["batch"], spec["mem"], spec["d"])).astype("float32")
    mems = [torch.from_numpy(m).transpose(0, 1).contiguous() for m in mems_np]
    model.eval()
    with torch.no_grad():
        log_probs = model(input_ids=tokens, mems=mems).prediction_scores.numpy()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    variants = training_variants(model, lambda forward: forward(input_ids=tokens, mems=mems, labels=tokens).loss,
                                 optimizer, spec["compile"])
    return {"variants": variants, "weights": path,
            "check": {"log_probs": log_probs, "tokens": tokens.numpy(), "mems": mems_np},
            "info": {"params": sum(p.numel() for p in model.parameters())}}


def load_file(path, name, replacements=()):
    """The module at `path`, with each (old, new) line of `replacements`
    changed as it loads (the checkout itself is left as it is)."""
    import importlib.util
    import types

    with open(path) as f:
        source = f.read()
    for old, new in replacements:
        source = source.replace(old, new)
    spec = importlib.util.spec_from_file_location(name, path)
    module = types.ModuleType(name)
    module.__file__, module.__spec__ = path, spec
    sys.modules[name] = module  # torch.compile looks its functions up there
    exec(compile(source, path, "exec"), module.__dict__)
    return module


# The port scales q in place on a view that torch.split returned, which
# autograd refuses in current torch ("a view ... is being modified
# inplace"): the same product, out of place.
RMC_PORT_FIXES = [("q *= (self.key_size ** -0.5)", "q = q * (self.key_size ** -0.5)")]


def peer_rmc(spec, folder, _weights):
    import numpy as np
    import torch

    module = load_file(os.path.join(spec["checkout"], "relational_rnn_general.py"), "relational_rnn_general",
                       RMC_PORT_FIXES)
    torch.manual_seed(0)
    rmc = module.RelationalMemory(mem_slots=spec["mem_slots"], head_size=spec["head_size"],
                                  input_size=spec["features"], num_heads=spec["num_heads"], num_blocks=1,
                                  gate_style="unit", attention_mlp_layers=2)
    head = torch.nn.Linear(rmc.mem_slots * rmc.mem_size, NUM_CLASSES)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((spec["batch"], spec["steps"], spec["features"]), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, NUM_CLASSES, spec["batch"]))
    memory = rmc.initial_state(spec["batch"])
    parameters = list(rmc.parameters()) + list(head.parameters())
    optimizer = torch.optim.Adam(parameters, lr=1e-3)

    def loss_of(x, y, memory):
        output, _ = rmc(x, memory)
        return torch.nn.functional.cross_entropy(head(output), y)

    variants = training_variants(loss_of, lambda forward: forward(x, y, memory), optimizer, spec["compile"])
    # `[nn.Linear] * 2` counts its one Linear once.
    return {"variants": variants, "info": {"params": sum(p.numel() for p in rmc.parameters())}}


def peer_rt(spec, folder, _weights):
    import numpy as np
    import torch

    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # the reference's three .cuda() calls
    module = load_file(os.path.join(spec["checkout"], "models", "RTransformer.py"), "r_transformer_reference")
    torch.manual_seed(0)
    block = module.Block(spec["d"], spec["d"], "GRU", spec["window"], N=spec["local_layers"], h=spec["heads"],
                         dropout=0.0)
    rng = np.random.default_rng(0)
    shape = (spec["batch"], spec["steps"], spec["d"])
    x = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    y = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    block.eval()
    with torch.no_grad():
        output = block(x).numpy()
    block.train()
    path = os.path.join(folder, f"r_transformer_{os.getpid()}.npz")
    np.savez(path, **{k: v.detach().numpy() for k, v in block.state_dict().items()})
    optimizer = torch.optim.Adam(block.parameters(), lr=1e-4)

    variants = training_variants(block, lambda forward: torch.nn.functional.mse_loss(forward(x), y), optimizer,
                                 spec["compile"])
    return {"variants": variants, "weights": path, "check": {"x": x.numpy(), "output": output},
            "info": {"params": sum(p.numel() for p in block.parameters())}}


PEER_SETUPS = {"txl-gen": peer_txl_gen, "txl-train": peer_txl_train, "rmc": peer_rmc, "rt": peer_rt}


# --- ours (Keras) -------------------------------------------------------------


def our_transformer_xl(spec, weights, segment_len):
    import keras
    import numpy as np

    from keras_relrec.layers import TransformerXL
    from keras_relrec.migrate import load_hf_transfo_xl

    state = dict(np.load(weights))
    backbone = TransformerXL(spec["layers"], spec["heads"], spec["head_size"], spec["d"], spec["inner"],
                             segment_len=segment_len, mem_len=spec["mem"], vocabulary_size=VOCABULARY,
                             tie_relative_biases=False, name="backbone")
    head = keras.layers.Dense(VOCABULARY, name="head")
    return backbone, head, state, load_hf_transfo_xl


def load_head(head, state):
    head.set_weights([state["crit.out_layers.0.weight"].T, state["crit.out_layers.0.bias"]])


def log_softmax(logits):
    import numpy as np

    logits = np.asarray(logits, "float64")
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def ours_txl_gen(spec, folder, weights):
    import numpy as np

    from keras_relrec.models import TransformerXLGenerator

    backbone, head, state, load = our_transformer_xl(spec, weights, segment_len=1)
    backbone(np.zeros((1, 1), "int32"))
    head.build((None, spec["d"]))
    load(backbone, state)
    load_head(head, state)
    generator = TransformerXLGenerator(backbone, head)
    prompt = np.asarray(spec["check_prompt"], "int32")
    log_probs = log_softmax(head(backbone(prompt)))
    tokens = generator.generate(prompt, max_new_tokens=spec["check_tokens"])
    start = np.zeros((spec["batch"], 1), "int32")
    n = spec["tokens"]
    return {"variants": {"default": lambda: generator.generate(start, max_new_tokens=n)},
            "check": {"log_probs": log_probs, "tokens": tokens},
            "info": {"params": backbone.count_params() + head.count_params()}}


def compile_model(model, loss, jit):
    import keras

    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=loss, jit_compile=jit)
    return model


def ours_txl_train(spec, folder, weights):
    import keras
    import numpy as np

    peer = np.load(spec["peer_check"])
    tokens, mems = peer["tokens"].astype("int32"), peer["mems"]
    rng = np.random.default_rng(1)
    targets = rng.integers(0, VOCABULARY, tokens.shape).astype("int32")
    states = [*mems, np.ones((spec["batch"], spec["mem"]), "float32")]
    variants, check = {}, None
    for jit in (False, True):
        backbone, head, state, load = our_transformer_xl(spec, weights, segment_len=spec["segment"])
        inputs = keras.Input((spec["segment"],), batch_size=spec["batch"], dtype="int32")
        state_inputs = [keras.Input(shape, batch_size=spec["batch"], dtype=dtype)
                        for _, shape, dtype in backbone.streaming_state_specs()]
        model = keras.Model([inputs, *state_inputs], head(backbone(inputs, initial_state=state_inputs)))
        load(backbone, state)
        load_head(head, state)
        compile_model(model, keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit)
        if check is None:
            check = {"log_probs": log_softmax(model.predict_on_batch([tokens, *states]))}
        variants["XLA" if jit else "graph"] = (
            lambda m=model: m.train_on_batch([tokens, *states], targets))
    return {"variants": variants, "check": check, "info": {"params": model.count_params()}}


def ours_rmc(spec, folder, weights):
    import keras
    import numpy as np

    from keras_relrec.layers import RelationalMemoryCell

    rng = np.random.default_rng(0)
    x = rng.standard_normal((spec["batch"], spec["steps"], spec["features"]), dtype=np.float32)
    y = rng.integers(0, NUM_CLASSES, spec["batch"]).astype("int32")
    variants = {}
    # The loop as a graph (TensorFlow only) and compiled, and compiled with
    # the steps unrolled (`RNN(unroll=True)`, for short sequences).
    modes = [(False, False), (True, False), (True, True)]
    if keras.backend.backend() == "jax":
        modes = modes[1:]
    for jit, unroll in modes:
        keras.utils.set_random_seed(0)
        inputs = keras.Input((spec["steps"], spec["features"]), batch_size=spec["batch"])
        rnn = keras.layers.RNN(RelationalMemoryCell(spec["mem_slots"], spec["head_size"],
                                                    num_heads=spec["num_heads"]), unroll=unroll)
        model = keras.Model(inputs, keras.layers.Dense(NUM_CLASSES)(rnn(inputs)))
        model.compile(optimizer=keras.optimizers.Adam(1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
        name = ("XLA" if jit else "graph") + (", unrolled" if unroll else "")
        variants[name] = lambda m=model: m.train_on_batch(x, y)
    return {"variants": variants, "info": {"params": rnn.count_params()}}


def ours_rt(spec, folder, weights):
    import keras
    import numpy as np

    from keras_relrec.layers import RTransformerBlock
    from keras_relrec.migrate import load_r_transformer_block

    peer = np.load(spec["peer_check"])
    state = dict(np.load(weights))
    x = peer["x"]
    y = np.random.default_rng(1).standard_normal(x.shape, dtype=np.float32)
    variants, check = {}, None
    # The block as it comes, and in chunks of 128 steps (the local
    # recurrence and the attention a chunk at a time, recomputed in the
    # backward pass): less memory for more time.
    for chunk_size in (None, 128):
        for jit in (False, True):
            inputs = keras.Input(x.shape[1:], batch_size=spec["batch"])
            block = RTransformerBlock(spec["heads"], spec["window"], num_local_layers=spec["local_layers"],
                                      cell="gru", chunk_size=chunk_size)
            model = keras.Model(inputs, block(inputs))
            load_r_transformer_block(block, state)
            compile_model(model, "mse", jit)
            output = model.predict_on_batch(x)
            if check is None:
                check = {"output": output}
            elif not np.allclose(output, check["output"], atol=1e-5):
                raise SystemExit(f"RTransformerBlock(chunk_size={chunk_size}) answers otherwise than unchunked")
            name = ("XLA" if jit else "graph") + ("" if chunk_size is None else f", chunk_size={chunk_size}")
            variants[name] = lambda m=model: m.train_on_batch(x, y)
    return {"variants": variants, "check": check, "info": {"params": block.count_params()}}


OURS_SETUPS = {"txl-gen": ours_txl_gen, "txl-train": ours_txl_train, "rmc": ours_rmc, "rt": ours_rt}


# ----------------------------------------------------------------------------
# Driver side


class WorkerError(RuntimeError):
    pass


class Worker:
    """A worker process and its JSON line protocol."""

    def __init__(self, side, python, folder, threads=None):
        self.side = side
        command = [python, os.path.abspath(__file__), WORKER, side, folder]
        environment = {**os.environ, **thread_environment(threads), "BENCH_THREADS": str(threads or 0)}
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, environment.get("PYTHONPATH")]))
        if side != "peer":
            environment["KERAS_BACKEND"] = "jax" if side == "ours-jax" else "tensorflow"
            environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=environment, cwd=ROOT, bufsize=1)

    def call(self, **message):
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise WorkerError(f"the {self.side} worker died (exit status {self.process.wait()}) during "
                              f"{message['cmd']} {message.get('kind', '')}")
        reply = json.loads(line)
        if "error" in reply:
            print(reply["traceback"], file=sys.stderr, flush=True)
            raise WorkerError(f"{self.side}: {reply['error']}")
        return reply

    def close(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.process.stdin.flush()
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


def log(t0, text):
    print(f"[{time.perf_counter() - t0:7.1f}s] {text}", flush=True)


class Row:
    """One work item: its prepared variants on each side, and their times."""

    def __init__(self, work, unit="ms"):
        self.work, self.unit = work, unit
        self.entries = []  # (side label, worker, id, variant)
        self.failed = {}  # "side mode": reason
        self.first = {}
        self.times = {}
        self.agree = "–"
        self.scale = 1.0  # divides a call's seconds into the unit's
        self.info = {}
        self.batch = 1
        self.graph_breaks = None


def prepare(row, label, worker, kind, spec, t0, weights=None):
    reply = worker.call(cmd="setup", kind=kind, spec=spec, weights=weights)
    row.info[label] = reply["info"]
    for variant in reply["variants"]:
        try:
            warm = worker.call(cmd="warm", id=reply["id"], variant=variant, n=2)
            row.first[f"{label} {variant}"] = warm["first_s"]
            if variant == "compile":
                row.graph_breaks = warm["graph_breaks"]
            row.entries.append((label, worker, reply["id"], variant))
        except WorkerError as error:
            if label != "PyTorch" or variant != "compile":
                raise
            row.failed[f"{label} {variant}"] = str(error).split(": ", 1)[1]
    log(t0, f"prepared {row.work}: {label} {reply['variants']}")
    return reply


def time_row(row, repeats, t0):
    samples = {(label, variant): [] for label, _, _, variant in row.entries}
    for _ in range(repeats):
        for label, worker, id_, variant in row.entries:
            samples[label, variant].append(worker.call(cmd="time", id=id_, variant=variant)["seconds"])
    row.times = {key: statistics.median(s) / row.scale for key, s in samples.items()}
    for _, worker, id_, _ in row.entries:
        worker.call(cmd="drop", id=id_)
    log(t0, f"timed {row.work}: " + ", ".join(f"{side} {mode} {s * 1e3:.2f} ms"
                                               for (side, mode), s in row.times.items()))


def compare(name, ours, theirs, exact=False):
    import numpy as np

    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ours.shape != theirs.shape:
        raise SystemExit(f"{name}: our outputs have shape {ours.shape}, PyTorch's {theirs.shape}")
    if exact:
        if not np.array_equal(ours, theirs):
            raise SystemExit(f"{name}: the tokens differ:\nours    {ours.tolist()}\nPyTorch {theirs.tolist()}")
        return 0.0
    difference = float(np.abs(ours.astype("float64") - theirs).max())
    if not difference <= ATOL:
        raise SystemExit(f"{name}: the outputs differ by {difference:.3g} (> {ATOL}): not the same function")
    return difference


def check_files(ours_path, peer_path):
    import numpy as np

    return np.load(ours_path), np.load(peer_path)


def gen_rows(args, workers, s, t0):
    rows = []
    prompt = [[(5 + 37 * k) % VOCABULARY for k in range(16)]]
    for size in s["gen"]:
        spec = dict(size, tokens=s["gen_tokens"], check_prompt=prompt, check_tokens=8,
                    compile=not args.no_compile)
        batch = spec["batch"]
        work = (f"Transformer-XL generation, {size['name']}, memory {size['mem']:,}, "
                + ("per token" if batch == 1 else f"batch {batch}, tokens/s"))
        row = Row(work, "ms/token" if batch == 1 else "tokens/s")
        row.scale, row.batch = spec["tokens"], batch  # seconds per step of `batch` tokens
        peer = prepare(row, "PyTorch", workers["peer"], "txl-gen", spec, t0)
        differences = []
        for label in ("ours-tf", "ours-jax"):
            reply = prepare(row, label, workers[label], "txl-gen", spec, t0, weights=peer["weights"])
            ours, theirs = check_files(reply["check"], peer["check"])
            differences.append(compare(f"{work} ({label})", ours["log_probs"], theirs["log_probs"]))
            compare(f"{work} ({label}), greedy tokens", ours["tokens"], theirs["tokens"], exact=True)
        row.agree = f"yes: log-probs within {max(differences):.1e}, 8 greedy tokens equal"
        time_row(row, args.repeats, t0)
        rows.append(row)
    return rows


def train_row(args, workers, s, t0):
    spec = dict(s["train"], compile=not args.no_compile)
    work = (f"Transformer-XL training step, {spec['layers']} × {spec['d']}, batch {spec['batch']}, "
            f"segment {spec['segment']}, memory {spec['mem']}")
    row = Row(work)
    peer = prepare(row, "PyTorch", workers["peer"], "txl-train", spec, t0)
    spec["peer_check"] = peer["check"]
    reply = prepare(row, "ours-tf", workers["ours-tf"], "txl-train", spec, t0, weights=peer["weights"])
    ours, theirs = check_files(reply["check"], peer["check"])
    difference = compare(work, ours["log_probs"], theirs["log_probs"])
    row.agree = f"yes: log-probs within {difference:.1e}"
    time_row(row, args.repeats, t0)
    return [row]


def rmc_rows(args, workers, s, t0):
    rows = []
    for size in s["rmc"]:
        spec = dict(size, checkout=args.rmc_pytorch, compile=not args.no_compile)
        row = Row(f"Relational memory training step, {size['name']}, batch {size['batch']}, "
                  f"{size['steps']} steps")
        prepare(row, "PyTorch", workers["peer"], "rmc", spec, t0)
        for label in ("ours-tf", "ours-jax"):
            prepare(row, label, workers[label], "rmc", spec, t0)
        row.agree = (f"not the same function (parameters: ours {row.info['ours-tf']['params']:,}, "
                     f"port {row.info['PyTorch']['params']:,})")
        time_row(row, args.repeats, t0)
        rows.append(row)
    return rows


def rt_rows(args, workers, s, t0, python, folder):
    spec = dict(s["rt"], checkout=args.r_transformer, compile=not args.no_compile)
    work = (f"R-Transformer block training step, T = {spec['steps']:,}, batch {spec['batch']}, d = {spec['d']}, "
            f"{spec['heads']} heads, window {spec['window']}, GRU")
    row = Row(work)
    peer = prepare(row, "PyTorch", workers["peer"], "rt", spec, t0)
    spec["peer_check"] = peer["check"]
    reply = prepare(row, "ours-tf", workers["ours-tf"], "rt", spec, t0, weights=peer["weights"])
    ours, theirs = check_files(reply["check"], peer["check"])
    row.agree = f"yes: outputs within {compare(work, ours['output'], theirs['output']):.1e}"
    time_row(row, args.repeats, t0)
    # Peak memory: a fresh process per variant.
    row.memory = {}
    for label, side in (("PyTorch", "peer"), ("ours-tf", "ours-tf")):
        variants = ["eager", "compile"] if side == "peer" else [
            "graph", "XLA", "graph, chunk_size=128", "XLA, chunk_size=128"]
        for variant in variants:
            if f"{label} {variant}" in row.failed or (variant == "compile" and args.no_compile):
                continue
            worker = Worker(side, python if side == "peer" else sys.executable, folder, args.threads)
            try:
                setup = worker.call(cmd="setup", kind="rt", spec=spec, weights=peer["weights"])
                row.memory[label, variant] = worker.call(cmd="memory", id=setup["id"], variant=variant)
            finally:
                worker.close()
            m = row.memory[label, variant]
            log(t0, f"memory {label} {variant}: peak {m['peak_kib'] / 1024:.0f} MiB, "
                    f"before {m['before_kib'] / 1024:.0f} MiB")
    return [row]


MODE_NAMES = {("ours-tf", "graph"): "TF graph", ("ours-tf", "XLA"): "TF XLA", ("ours-tf", "default"): "TF",
              ("ours-jax", "default"): "JAX", ("PyTorch", "eager"): "eager", ("PyTorch", "compile"): "compile",
              ("ours-tf", "graph, chunk_size=128"): "TF graph in chunks of 128",
              ("ours-tf", "XLA, chunk_size=128"): "TF XLA in chunks of 128",
              ("ours-tf", "XLA, unrolled"): "TF XLA unrolled", ("ours-jax", "XLA"): "JAX",
              ("ours-jax", "XLA, unrolled"): "JAX unrolled"}


def value(row, seconds):
    if row.unit == "tokens/s":
        return row.batch / seconds
    return seconds * 1e3


def number(x):
    """Three significant digits, thousands separated."""
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if x >= 1 else f"{x:.3f}"


def cell(row, side):
    parts = []
    for (label, variant), seconds in row.times.items():
        if (label == "PyTorch") == (side == "peer"):
            parts.append(f"{MODE_NAMES[label, variant]} {number(value(row, seconds))}")
    if side == "peer":
        parts += [f"compile: failed ({reason})" for name, reason in row.failed.items() if name.startswith("PyTorch")]
    return " / ".join(parts)


def best(row, side):
    options = [(s, key) for key, s in row.times.items() if (key[0] == "PyTorch") == (side == "peer")]
    return min(options)


def render(args, rows, environment, load_before, load_after):
    lines = results_file.section_header("Against PyTorch: the same work in the code people would use instead",
                                        args.quick, environment)
    lines += [
        f"- Load average before the run: {' / '.join(f'{x:.2f}' for x in load_before)} (1 / 5 / 15 min), "
        f"after: {' / '.join(f'{x:.2f}' for x in load_after)}; other work shared the machine",
        f"- Medians of {args.repeats} interleaved rounds after warm-up (see the script's docstring); "
        + (f"{args.threads} thread(s) on every side (`--threads`)" if args.threads
           else "each side with its library's default threads")
        + "; ratio = best PyTorch mode ÷ best of ours (> 1: ours faster)",
        "- Peers: HuggingFace `TransfoXLLMHeadModel` (greedy loop with `mems`, `torch.no_grad`); "
        f"[L0SG/relational-rnn-pytorch]({RMC_URL}) `relational_rnn_general.py`; "
        f"[DSE-MSU/R-transformer]({RT_URL}) `models/RTransformer.py`",
        f"- Our code: {code_version()}",
        "",
        "| work | unit | ours (mode) | PyTorch (mode) | ratio (best ÷ best) | outputs agree |",
        "|---|---|---|---|---:|---|",
    ]
    for row in rows:
        ours_s, ours_key = best(row, "ours")
        peer_s, peer_key = best(row, "peer")
        ratio = peer_s / ours_s
        lines.append(f"| {row.work} | {row.unit} | {cell(row, 'ours')} | {cell(row, 'peer')} "
                     f"| {ratio:.2f} ({MODE_NAMES[ours_key]} vs {MODE_NAMES[peer_key]}) | {row.agree} |")
    if any(row.work.startswith("Transformer-XL generation") for row in rows):
        lines += ["", "Generation: HuggingFace's model projects its whole memory (all M positions, every layer) "
                  "to keys and values again at every token (`qkv_net` over `cat(mems, w)`); our generator keeps "
                  "the memories as projected keys and values (`key_value_cache`), projects only the new "
                  "position, and runs the whole loop as one compiled call."]
    memory_rows = [row for row in rows if getattr(row, "memory", None)]
    for row in memory_rows:
        lines += ["", f"Peak memory, {row.work} (fresh process per mode; MiB):", "",
                  "| side | mode | peak resident set | rise over the resident set before the first step "
                  "| rise over the resident set after the warm-up step |",
                  "|---|---|---:|---:|---:|"]
        for (label, variant), m in row.memory.items():
            note = "" if m["reset"] else " (high-water mark not reset: warm-up included)"
            lines.append(f"| {'ours' if label != 'PyTorch' else 'PyTorch'} | {MODE_NAMES[label, variant]} "
                         f"| {m['peak_kib'] / 1024:,.0f} | {(m['peak_kib'] - m['before_kib']) / 1024:,.0f}{note} "
                         f"| {(m['peak_kib'] - m['warm_kib']) / 1024:,.0f} |")
    firsts = [f"{row.work}: " + ", ".join(f"{k} {v:.1f} s" for k, v in row.first.items())
              + ("" if row.graph_breaks is None else f" (torch.compile: {row.graph_breaks} graph breaks)")
              for row in rows]
    lines += ["", "<details><summary>First calls (tracing, compiling), seconds</summary>", ""]
    lines += [f"- {line}" for line in firsts]
    lines += ["", "</details>"]
    if args.no_compile:
        lines += ["", "- torch.compile not run (`--no-compile`; the quick mode skips it)."]
    return "\n".join(lines) + "\n"


def code_version():
    """The commit this checkout is at, and whether the package differs from it."""
    def git(*arguments):
        result = subprocess.run(["git", "-C", ROOT, *arguments], capture_output=True, text=True)
        return result.stdout.strip() if result.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return "not a git checkout"
    changed = git("status", "--porcelain", "--", "keras_relrec")
    return f"commit {commit}" + (" with uncommitted changes to keras_relrec/" if changed else "")


def reference_python(argument):
    python = argument or os.environ.get("REFERENCE_PYTHON") or os.path.join(ROOT, ".venv-reference", "bin",
                                                                                "python")
    check = "import torch, transformers; assert transformers.__version__ == '4.35.0', transformers.__version__"
    if not os.path.exists(python) or subprocess.run([python, "-c", check], capture_output=True).returncode:
        raise SystemExit(
            f"bench_vs_pytorch needs a Python with torch and transformers 4.35.0 (tried {python}): "
            "`make .venv-reference/.installed`, or pass --reference-python / set REFERENCE_PYTHON.")
    return python


def check_checkout(path, variable, url, relative):
    if not path or not os.path.isfile(os.path.join(path, relative)):
        raise SystemExit(
            f"bench_vs_pytorch: {variable} must name a checkout of {url} (it needs {relative}; "
            f"got {path!r}): `git clone {url} <folder>` and run with {variable}=<folder>, or leave its rows "
            f"out with --only.")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_file.add_common_arguments(parser, "tiny sizes, no torch.compile, about a minute")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default=",".join(ROWS), help=f"comma-separated rows among {', '.join(ROWS)}")
    parser.add_argument("--reference-python", default=None,
                        help="Python with torch and transformers 4.35.0 (default $REFERENCE_PYTHON, "
                             "else .venv-reference/bin/python)")
    parser.add_argument("--rmc-pytorch", default=os.environ.get("RMC_PYTORCH"),
                        help=f"checkout of {RMC_URL} (default $RMC_PYTORCH)")
    parser.add_argument("--r-transformer", default=os.environ.get("R_TRANSFORMER"),
                        help=f"checkout of {RT_URL} (default $R_TRANSFORMER)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of every side (TF, XLA, JAX, torch); default: each library's own")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--compile", action="store_true", help="run torch.compile in --quick too")
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(args.only) - set(ROWS))
    if unknown:
        parser.error(f"--only: unknown rows {unknown}; choose among {', '.join(ROWS)}")
    if args.quick:
        args.repeats = min(args.repeats, 2)
        args.no_compile = not args.compile
    return args


def main(argv=None):
    args = parse_args(argv)
    python = reference_python(args.reference_python)
    if "rmc" in args.only:
        check_checkout(args.rmc_pytorch, "RMC_PYTORCH", RMC_URL, "relational_rnn_general.py")
    if "rt" in args.only:
        check_checkout(args.r_transformer, "R_TRANSFORMER", RT_URL, os.path.join("models", "RTransformer.py"))
    results_file.use_tensorflow_backend()
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    s = sizes(args.quick)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_vs_pytorch_") as folder:
        workers = {"peer": Worker("peer", python, folder, args.threads),
                   "ours-tf": Worker("ours-tf", sys.executable, folder, args.threads)}
        if "txl-gen" in args.only or "rmc" in args.only:
            workers["ours-jax"] = Worker("ours-jax", sys.executable, folder, args.threads)
        try:
            peer_versions = workers["peer"].call(cmd="versions")
            environment = {"torch": peer_versions["torch"], "transformers": peer_versions["transformers"]}
            if "ours-jax" in workers:
                environment["jax"] = workers["ours-jax"].call(cmd="versions")["jax"]
            if "txl-gen" in args.only:
                rows += gen_rows(args, workers, s, t0)
            if "txl-train" in args.only:
                rows += train_row(args, workers, s, t0)
            if "rmc" in args.only:
                rows += rmc_rows(args, workers, s, t0)
            if "rt" in args.only:
                rows += rt_rows(args, workers, s, t0, python, folder)
        finally:
            for worker in workers.values():
                worker.close()
    section = results_file.write_section(args.output, SECTION,
                                         render(args, rows, environment, load_before, os.getloadavg()))
    print(section)
    print(f"wrote {args.output} in {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    side = worker_side()
    if side is not None:
        if side != "peer":
            os.environ["KERAS_BACKEND"] = "jax" if side == "ours-jax" else "tensorflow"
            results_file.use_tensorflow_backend() if side == "ours-tf" else None
        serve(side, sys.argv[sys.argv.index(WORKER) + 2])
    else:
        main()
