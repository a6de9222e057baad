"""Make small float64 "golden" arrays from the public R-Transformer code (PyTorch).

The reference is DSE-MSU/R-transformer (commit 3103cdf), ``models/RTransformer.py``: its ``Block``
(N local-RNN layers, causal multi-head attention, feed-forward, each pre-norm and residual).  The
test suite only reads the ``.npz`` files written here; it needs neither torch nor the reference.

How to run (from the repository root)::

    git clone https://github.com/DSE-MSU/R-transformer /tmp/R-transformer
    python3.11 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch numpy   # a CPU build
    /tmp/torchvenv/bin/python tests/goldens/make_r_transformer_goldens.py /tmp/R-transformer [output folder]

(``make test-parity`` does the same with R_TRANSFORMER=<checkout>.)  It writes
``r_transformer_block_*.npz`` into ``tests/goldens`` (or the folder given);
``tests/layers/local_recurrence/test_r_transformer_goldens.py`` compares them with
``RTransformerBlock`` and, where torch and a checkout are at hand, reruns this script into a
temporary folder and checks the committed files against it.

The reference moves three tensors to the GPU when it builds its modules (``.cuda()`` on the causal
mask, the window index list and the zero padding); this script makes ``Tensor.cuda`` return the
tensor itself, so it runs on the CPU, and nothing else of the reference changes.  The modules run in
float64 (``.double()``), in eval mode, with dropout 0.

Weights: every parameter is re-initialised from a fixed seed so that none keeps a default value:
LayerNorm gains ``1 + 0.1 * N(0, 1)``, every other parameter (Linear and RNN weights and biases,
LayerNorm offsets) ``0.3 * N(0, 1)``.  Each is stored as ``"param/" + <state dict name>`` in
PyTorch's layout (``nn.Linear`` weights are ``(out, in)``; RNN ``weight_ih_l0`` is
``(gates * d, d)`` with the gates in PyTorch's order: GRU r, z, n; LSTM i, f, g, o).  The local
RNN's unused output projection (``local_rnn.output``, never called by ``forward``) is stored too.

Cases (``x`` is (batch, T, d), ``output`` the block's output, scalars ``ksize``, ``n``, ``h``):

- ``gru``: d = 8, h = 2, ksize = 3, N = 2, T = 7, batch 2.
- ``lstm``: d = 8, h = 4, ksize = 4, N = 1, T = 6, batch 3.
- ``rnn`` (tanh): d = 6, h = 3, ksize = 5, N = 1, T = 3 (windows longer than the sequence), batch 2.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import torch

CASES = {
    "gru": {"rnn_type": "GRU", "d": 8, "h": 2, "ksize": 3, "n": 2, "steps": 7, "batch": 2},
    "lstm": {"rnn_type": "LSTM", "d": 8, "h": 4, "ksize": 4, "n": 1, "steps": 6, "batch": 3},
    "rnn": {"rnn_type": "RNN", "d": 6, "h": 3, "ksize": 5, "n": 1, "steps": 3, "batch": 2},
}


def load_reference(checkout):
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # the reference's three .cuda() calls
    spec = importlib.util.spec_from_file_location("r_transformer_reference",
                                                  pathlib.Path(checkout) / "models" / "RTransformer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reinitialise(block, generator):
    with torch.no_grad():
        for name, param in block.named_parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=torch.float64)
            param.copy_(1 + 0.1 * noise if name.endswith("a_2") else 0.3 * noise)


def make(reference, case, seed):
    generator = torch.Generator().manual_seed(seed)
    block = reference.Block(case["d"], case["d"], case["rnn_type"], case["ksize"], N=case["n"], h=case["h"],
                            dropout=0.0)
    block = block.double().eval()
    for layer in block.layers:  # a plain attribute, which .double() leaves in float32
        layer.local_rnn.zeros = layer.local_rnn.zeros.double()
    reinitialise(block, generator)
    x = torch.randn((case["batch"], case["steps"], case["d"]), generator=generator, dtype=torch.float64)
    with torch.no_grad():
        output = block(x)
    arrays = {f"param/{name}": value.numpy() for name, value in block.state_dict().items()}
    arrays.update(x=x.numpy(), output=output.numpy(), ksize=case["ksize"], n=case["n"], h=case["h"])
    return arrays


def main(checkout, folder):
    reference = load_reference(checkout)
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (name, case) in enumerate(CASES.items()):
        np.savez(folder / f"r_transformer_block_{name}.npz", **make(reference, case, seed))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else pathlib.Path(__file__).parent)
