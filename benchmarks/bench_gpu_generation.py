"""Transformer-XL generation on a GPU: `TransformerXLGenerator` (JAX, one
compiled loop, the key/value cache) against HuggingFace's `TransfoXLLMHeadModel`
in the loop people write (torch, eager: feed the token with `mems`, take the
argmax, feed it back), with the same weights.

Sizes as `bench_vs_pytorch.py`'s generation rows: 6 layers, d = 256, 8
heads of 32, d_inner = 1,024 and 2 layers, d = 64, 4 heads of 16, d_inner =
256; memories of 512 and 2,048 positions; batch 1 and 8; vocabulary 256;
greedy. Then HF's WT103 configuration (18 layers, d = 1,024, adaptive input
and softmax over 267,735 tokens, tied; memory 1,600, clamp_len 1,000,
same_length) with random weights, loaded into ours with
`build_hf_transfo_xl` and `load_hf_transfo_xl` (HF's initialisation leaves
the next-token distribution near uniform, where a greedy choice could flip
on rounding: the output biases are drawn with standard deviation 2).

Per token: one `generate` call of N tokens over N, median of 5
calls after a warm-up (ours; at WT103's size the call runs a prompt segment
of 16 first, timed alone and taken off); HF: N + 1 forward calls from `mems=None` (M
zero positions it attends, the work of a full memory) over N + 1. Matrix
products in full float32 on both sides (TF32 off), so that the check can
hold: before timing, the log-probabilities of a 16-token prompt from an
empty memory must agree within 1e-3 and the 16 greedy tokens that follow
must be equal.

It needs a machine with a GPU, JAX with CUDA, torch with CUDA, Keras 3 and
transformers 4.35 (the last release with TransfoXL), and this repository
on the path; no TensorFlow. Measure there, then write the section here:

    python benchmarks/bench_gpu_generation.py --json gpu_generation.json
    python benchmarks/bench_gpu_generation.py --write-results gpu_generation.json
"""

import argparse
import datetime
import json
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

SECTION = "bench_gpu_generation"
VOCABULARY = 256
SIZES = [(6, 8, 32, 256, 1024), (2, 4, 16, 64, 256)]
MEMORIES = (512, 2048)
BATCHES = (1, 8)


def hf_model(layers, heads, head_size, width, inner, memory):
    import torch
    from transformers import TransfoXLConfig
    from transformers import TransfoXLLMHeadModel

    config = TransfoXLConfig(
        vocab_size=VOCABULARY, cutoffs=[], d_model=width, d_embed=width, n_head=heads, d_head=head_size,
        d_inner=inner, div_val=1, n_layer=layers, mem_len=memory, clamp_len=-1, same_length=False, adaptive=False,
        dropout=0.0, dropatt=0.0, untie_r=True, pre_lnorm=False, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = TransfoXLLMHeadModel(config).eval()
    with torch.no_grad():
        # HF's init leaves the log-probabilities near uniform, where a greedy
        # choice could flip on rounding: logits of std ~2.
        model.crit.out_layers[0].weight.normal_(0.0, 2.0 / width**0.5)
        model.crit.out_layers[0].bias.normal_(0.0, 0.1)
    return model


def hf_greedy(model, tokens, mems, count):
    """The tokens after `tokens`, greedy, `count` + 1 forward calls."""
    import torch

    chosen = []
    with torch.no_grad():
        result = model(input_ids=tokens, mems=mems)
        for _ in range(count):
            token = result.prediction_scores[:, -1].argmax(-1, keepdim=True)
            chosen.append(token)
            result = model(input_ids=token, mems=result.mems)
        torch.cuda.synchronize()
    return torch.cat(chosen, 1).cpu().numpy()


def measure(tokens):
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import keras
    import numpy as np
    import torch
    import transformers

    from keras_relrec.layers import TransformerXL
    from keras_relrec.migrate import load_hf_transfo_xl
    from keras_relrec.models import TransformerXLGenerator

    jax.config.update("jax_default_matmul_precision", "highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    environment = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(0),
        "versions": {"JAX": jax.__version__, "Keras": keras.__version__, "torch": torch.__version__,
                     "transformers": transformers.__version__},
    }
    rows = []
    prompt = np.random.default_rng(0).integers(0, VOCABULARY, size=(1, 16))
    for layers, heads, head_size, width, inner in SIZES:
        for memory in MEMORIES:
            hf = hf_model(layers, heads, head_size, width, inner, memory)
            state = {name: value.detach().numpy() for name, value in hf.state_dict().items()}
            hf = hf.cuda()
            backbone = TransformerXL(layers, heads, head_size, width, inner, segment_len=1, mem_len=memory,
                                     vocabulary_size=VOCABULARY)
            head = keras.layers.Dense(VOCABULARY)
            backbone(np.zeros((1, 1), "int32"))
            head.build((None, width))
            load_hf_transfo_xl(backbone, state)
            head.set_weights([state["crit.out_layers.0.weight"].T, state["crit.out_layers.0.bias"]])
            generator = TransformerXLGenerator(backbone, head)
            # The check, from an empty memory on both sides.
            empty = [torch.zeros(0, 1, width, device="cuda") for _ in range(layers)]
            with torch.no_grad():
                theirs = hf(input_ids=torch.from_numpy(prompt).cuda(), mems=empty).prediction_scores
            ours = _log_softmax(np.asarray(head(backbone(prompt)), "float64"))
            log_probs_gap = float(np.abs(ours - theirs.cpu().numpy()).max())
            greedy_equal = bool((hf_greedy(hf, torch.from_numpy(prompt).cuda(), empty, 16)
                                 == generator.generate(prompt, 16)[:, 16:]).all())
            if log_probs_gap > 1e-3 or not greedy_equal:
                raise SystemExit(f"outputs differ at {layers}x{width}, memory {memory}: log-probabilities by "
                                 f"{log_probs_gap:.2e}, greedy tokens equal: {greedy_equal}")
            for batch in BATCHES:
                start = np.zeros((batch, 1), "int32")
                generator.generate(start, tokens)
                ours_ms = np.median([_timed(generator.generate, start, tokens) / tokens * 1e3 for _ in range(5)])
                start_torch = torch.zeros((batch, 1), dtype=torch.int64, device="cuda")
                hf_greedy(hf, start_torch, None, tokens)
                theirs_ms = np.median([_timed(hf_greedy, hf, start_torch, None, tokens) / (tokens + 1) * 1e3
                                       for _ in range(5)])
                rows.append({"layers": layers, "width": width, "memory": memory, "batch": batch,
                             "ours_ms": round(float(ours_ms), 3), "hf_eager_ms": round(float(theirs_ms), 3),
                             "log_probs_gap": log_probs_gap})
                print(json.dumps(rows[-1]), flush=True)
    return {"environment": environment, "tokens": tokens, "rows": rows, "wt103_rows": measure_wt103(tokens)}


def measure_wt103(tokens):
    """WT103's configuration, per token, ours against HF's eager loop."""
    import numpy as np
    import torch
    from transformers import TransfoXLConfig
    from transformers import TransfoXLLMHeadModel

    from keras_relrec.migrate import build_hf_transfo_xl
    from keras_relrec.migrate import load_hf_transfo_xl
    from keras_relrec.models import TransformerXLGenerator

    config = TransfoXLConfig(mem_len=1600, dropout=0.0, dropatt=0.0)  # HF's defaults: WT103's
    torch.manual_seed(0)
    hf = TransfoXLLMHeadModel(config).eval()
    with torch.no_grad():
        for layer in hf.crit.out_layers:
            layer.bias.normal_(0.0, 2.0)
        hf.crit.cluster_bias.normal_(0.0, 2.0)
    state = {name: value.detach().numpy() for name, value in hf.state_dict().items()}
    hf = hf.cuda()
    segment = 16
    backbone, head = build_hf_transfo_xl(config.to_dict(), segment_len=segment)
    load_hf_transfo_xl(backbone, state, head=head)
    generator = TransformerXLGenerator(backbone, head)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, size=(1, segment))
    empty = [torch.zeros(0, 1, config.d_model, device="cuda") for _ in range(config.n_layer)]
    with torch.no_grad():
        theirs = hf(input_ids=torch.from_numpy(prompt).cuda(), mems=empty).prediction_scores
    ours = np.asarray(head(backbone(prompt)), "float64")
    log_probs_gap = float(np.abs(ours - theirs.cpu().numpy()).max())
    greedy_equal = bool((hf_greedy(hf, torch.from_numpy(prompt).cuda(), empty, 16)
                         == generator.generate(prompt, 16)[:, segment:]).all())
    if log_probs_gap > 1e-3 or not greedy_equal:
        raise SystemExit(f"outputs differ at WT103's size: log-probabilities by {log_probs_gap:.2e}, greedy tokens "
                         f"equal: {greedy_equal}")
    rows = []
    for batch in BATCHES:
        start = np.zeros((batch, segment), "int32")
        generator.generate(start, tokens)
        # Less the prompt's segment, timed alone: the cost per new token.
        prompt_s = np.median([_timed(generator.step, start, generator.initial_state(batch), True)
                              for _ in range(5)])
        ours_ms = np.median([(_timed(generator.generate, start, tokens) - prompt_s) / tokens * 1e3
                             for _ in range(5)])
        start_torch = torch.zeros((batch, 1), dtype=torch.int64, device="cuda")
        hf_greedy(hf, start_torch, None, tokens)
        theirs_ms = np.median([_timed(hf_greedy, hf, start_torch, None, tokens) / (tokens + 1) * 1e3
                               for _ in range(5)])
        rows.append({"memory": config.mem_len, "batch": batch, "ours_ms": round(float(ours_ms), 3),
                     "hf_eager_ms": round(float(theirs_ms), 3), "log_probs_gap": log_probs_gap})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _timed(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _log_softmax(logits):
    import numpy as np

    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def section(results):
    environment = results["environment"]
    versions = ", ".join(f"{name} {version}" for name, version in environment["versions"].items())
    lines = [
        "## Transformer-XL generation on a GPU (`bench_gpu_generation.py`)", "",
        f"- Date: {environment['date']}",
        f"- Machine: {environment['gpu']} (one GPU)",
        f"- {versions}; matrix products in full float32 (TF32 off) on both sides",
        f"- Per token: ours one `generate` call of {results['tokens']} tokens (JAX, the compiled loop); "
        "HuggingFace's greedy loop with `mems`, eager (torch.compile not timed here), from a full memory. "
        "WT103: random weights (output biases of standard deviation 2, so that greedy choices do not flip on "
        "rounding), loaded with `build_hf_transfo_xl`; ours after a 16-token prompt, its step timed alone and "
        "taken off. "
        "Checked first: log-probabilities "
        "of a 16-token prompt within 1e-3 and the 16 greedy tokens that follow equal.", "",
        "| layers × d | memory | batch | ours (ms/token) | HF TransfoXL eager (ms/token) | ratio (>1: ours faster) | "
        "log-prob gap |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(f"| {row['layers']} × {row['width']} | {row['memory']:,} | {row['batch']} | {row['ours_ms']:.3f} "
                     f"| {row['hf_eager_ms']:.3f} | {row['hf_eager_ms'] / row['ours_ms']:.1f}× | "
                     f"{row['log_probs_gap']:.1e} |")
    for row in results.get("wt103_rows", []):
        lines.append(f"| WT103: 18 × 1,024, adaptive input and softmax over 267,735 tokens | {row['memory']:,} | "
                     f"{row['batch']} | {row['ours_ms']:.3f} | {row['hf_eager_ms']:.3f} | "
                     f"{row['hf_eager_ms'] / row['ours_ms']:.1f}× | {row['log_probs_gap']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "gpu_generation.json"),
                        help="where the measurement writes its results")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--write-results", metavar="JSON",
                        help="write the RESULTS.md section from a measurement's results, measuring nothing")
    parser.add_argument("--output", default=os.path.join(_HERE, "RESULTS.md"))
    args = parser.parse_args()
    if args.write_results:
        import results_file

        with open(args.write_results) as f:
            results_file.write_section(args.output, SECTION, section(json.load(f)))
        return
    results = measure(args.tokens)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
