"""Make small float64 "golden" arrays from HuggingFace transformers 4.35.0 Transformer-XL.

The files written here are reference outputs of the HuggingFace PyTorch implementation of
Transformer-XL (``transformers.models.transfo_xl.modeling_transfo_xl`` in 4.35.0; it moved to
``transformers.models.deprecated.transfo_xl`` only in later releases).  They are meant to be
compared against this package's own Keras implementation.  The test suite only reads the
``.npz`` files; it needs neither torch nor transformers.

How to run (from the repository root)::

    python3.11 -m venv /tmp/hfvenv
    /tmp/hfvenv/bin/pip install torch==2.13.0    # a CPU build; any recent torch works
    /tmp/hfvenv/bin/pip install transformers==4.35.0 numpy
    /tmp/hfvenv/bin/python tests/goldens/make_transfo_xl_goldens.py [output folder]

It writes ``transfo_xl_*.npz`` into ``tests/goldens`` (or the folder given);
``tests/migrate/test_hf_transfo_xl.py`` runs it into a temporary folder and
compares with the committed files where torch and transformers 4.35.0 are
installed.  Everything runs in float64, in eval mode, with
dropout 0 and fixed seeds, so rerunning reproduces the same arrays.

Weights
-------
After construction every parameter is re-initialised so that none keeps a default value:
LayerNorm weights ``1 + 0.1 * N(0, 1)``, Linear/LayerNorm biases ``0.1 * N(0, 1)``, every other
parameter (Linear weights, the embedding table, ``r_w_bias``, ``r_r_bias``) ``0.3 * N(0, 1)``.
Each ``state_dict`` entry is stored as ``"param/" + <state dict name>`` in PyTorch's layout
(``nn.Linear`` weights are ``(out, in)``; ``qkv_net`` output columns are ``[q | k | v]``, each
``n_head * d_head`` wide, head-major).  The non-trainable buffer ``pos_emb.inv_freq`` of the model
is stored too (it is in the state dict).  When ``untie_r`` is False the model-level ``r_w_bias`` /
``r_r_bias`` are one shared tensor, and the state dict also lists it under every
``layers.{i}.dec_attn.r_w_bias`` / ``r_r_bias`` name (same values).

Embedding: with ``div_val=1``, ``cutoffs=[]`` and ``d_embed == d_model`` HF's ``AdaptiveEmbedding``
is a single ``nn.Embedding`` (``word_emb.emb_layers.0.weight``, shape ``(vocab, d_model)``) with no
projection (``emb_projs`` is empty), whose output is multiplied by ``sqrt(d_model)`` (=4.0 here).
The script asserts this.

One deviation from HF's code, needed for float64
------------------------------------------------
HF 4.35 masks attention scores with
``attn_score.float().masked_fill(mask, torch.finfo(attn_score.dtype).min).type_as(attn_score)``.
In float64 that raises ("value cannot be converted to type float without overflow") and would in
any case round the scores to float32.  The script re-compiles HF's own
``RelPartialLearnableMultiHeadAttn.forward`` source with ``.float()`` removed from those two lines
(nothing else changes; in float32 the two versions are identical).

Layer goldens: ``transfo_xl_layer_prelnorm{0,1}_mem{empty,full}.npz``
---------------------------------------------------------------------
``RelPartialLearnableDecoderLayer(n_head=2, d_model=16, d_head=8, d_inner=32, dropout=0.0,
pre_lnorm=P, layer_norm_epsilon=1e-5)`` (per-layer ``r_w_bias``/``r_r_bias``), qlen=5, bsz=3,
mlen=0 ("empty", the layer is called with ``mems=None``) or 4 ("full"), klen = mlen + qlen.
Keys: ``w`` (qlen, bsz, d), ``mems`` (mlen, bsz, d), ``r`` (klen, 1, d) -- the sinusoid embedding
of ``pos_seq = klen-1, ..., 0`` exactly as the model passes it, ``mask`` (qlen, klen, 1), 1.0 =
masked, ``= triu(ones(qlen, klen), 1 + mlen)`` as the model builds it with same_length=False,
``output`` (qlen, bsz, d), scalars ``pre_lnorm``, ``mlen`` and the ``param/...`` entries.

Model goldens: ``transfo_xl_model_{postln,preln,clamp,samelength}.npz``
----------------------------------------------------------------------
``TransfoXLModel`` with vocab_size=11, cutoffs=[], d_model=d_embed=16, n_head=2, d_head=8,
d_inner=32, div_val=1, n_layer=2, mem_len=6, adaptive=False, dropout=dropatt=0,
layer_norm_epsilon=1e-5 and (pre_lnorm, clamp_len, same_length, untie_r) per configuration.
(``tgt_len`` / ``ext_len`` are not TransfoXLConfig parameters in 4.35 and are not used.)
``input_ids`` (bsz=2, 12) is run as three segments of 4 tokens, feeding back the returned mems.

Two runs are stored per file:

* ``hidden_{s}`` (bsz, 4, d) / ``mems_{s}_{layer}`` (6, bsz, d): segment 0 with ``mems=None``.
  NOTE: HF's own "empty" start (``init_mems``) is ``mem_len`` rows of ZEROS, which are attended to
  like real memory (they are not masked), so mlen is 6 for every segment and every returned
  memory has 6 rows (the last 2 zero rows + 4 new ones after segment 0).
* ``emptystart_hidden_{s}`` / ``emptystart_mems_{s}_{layer}``: segment 0 with a zero-length
  memory (a list of ``(0, bsz, d)`` tensors), so memory really grows 0 -> 4 -> 6 -> 6 rows (the
  memory read by segment s has 0, 4, 6 rows; the one returned after it 4, 6, 6 rows).

``mems_{s}_{layer}`` is the memory returned after segment s, i.e. the input hidden states of layer
``layer`` (layer 0: the scaled embeddings) for the last ``mem_len`` positions, in HF's
(mlen, bsz, d_model) layout.  Scalars: ``pre_lnorm``, ``clamp_len``, ``same_length``, ``untie_r``,
``mem_len``, ``n_layer``, ``n_head``, ``d_head``, ``d_model``, ``d_inner``, ``vocab_size``,
``seg_len``.
"""

from __future__ import annotations

import inspect
import io
import os
import sys
import textwrap
import zipfile

import numpy as np
import torch
import transformers
from transformers import TransfoXLConfig
from transformers.models.transfo_xl import modeling_transfo_xl as hf_txl
from transformers.models.transfo_xl.modeling_transfo_xl import RelPartialLearnableDecoderLayer
from transformers.models.transfo_xl.modeling_transfo_xl import RelPartialLearnableMultiHeadAttn
from transformers.models.transfo_xl.modeling_transfo_xl import TransfoXLModel

OUT_DIR = os.path.join("tests", "goldens")

N_HEAD, D_MODEL, D_HEAD, D_INNER = 2, 16, 8, 32
EPS = 1e-5


def _patch_float64_masking() -> None:
    """Drop HF's ``.float()`` cast in the attention masking so float64 works (see docstring)."""
    src = textwrap.dedent(inspect.getsource(RelPartialLearnableMultiHeadAttn.forward))
    old = "attn_score.float().masked_fill("
    assert src.count(old) == 2, "unexpected HF source; check the masking lines"
    src = src.replace(old, "attn_score.masked_fill(")
    namespace: dict = {}
    exec(compile(src, hf_txl.__file__, "exec"), vars(hf_txl), namespace)
    RelPartialLearnableMultiHeadAttn.forward = namespace["forward"]


def _reinit(module: torch.nn.Module) -> None:
    """Give every parameter a random, non-default value (shared parameters once)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif leaf == "bias":
                p.copy_(0.1 * torch.randn_like(p))
            else:  # Linear / Embedding weights, r_w_bias, r_r_bias
                p.copy_(0.3 * torch.randn_like(p))


def _params(module: torch.nn.Module) -> dict:
    out = {}
    for name, t in module.state_dict().items():
        assert t.dtype == torch.float64, (name, t.dtype)
        out["param/" + name] = t.detach().cpu().numpy().astype(np.float64)
    return out


def _pos_emb(klen: int, d_model: int, clamp_len: int = -1) -> torch.Tensor:
    """HF PositionalEmbedding(pos_seq)[:, None, :] for pos_seq = klen-1 .. 0."""
    pos_seq = torch.arange(klen - 1, -1, -1.0, dtype=torch.float64)
    if clamp_len > 0:
        pos_seq = pos_seq.clamp(max=clamp_len)
    inv_freq = 1 / (10000 ** (torch.arange(0.0, d_model, 2.0, dtype=torch.float64) / d_model))
    sinusoid = torch.outer(pos_seq, inv_freq)
    return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]


def _save(name: str, arrays: dict) -> None:
    """Like np.savez_compressed, but with fixed zip timestamps so reruns give identical bytes."""
    path = os.path.join(OUT_DIR, name)
    with zipfile.ZipFile(path, "w") as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[key]), allow_pickle=False)
            zf.writestr(info, buf.getvalue())
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(arrays)} arrays)")


def make_layer_goldens() -> None:
    qlen, bsz = 5, 3
    for seed_off, pre_lnorm in enumerate((False, True)):
        for mem_off, memory in enumerate(("empty", "full")):
            torch.manual_seed(1000 + 10 * seed_off + mem_off)
            mlen = 0 if memory == "empty" else 4
            klen = mlen + qlen
            layer = RelPartialLearnableDecoderLayer(
                N_HEAD, D_MODEL, D_HEAD, D_INNER, 0.0, layer_norm_epsilon=EPS, pre_lnorm=pre_lnorm
            ).double()
            _reinit(layer)
            layer.eval()

            w = torch.randn(qlen, bsz, D_MODEL)
            mems = torch.randn(mlen, bsz, D_MODEL)
            r = _pos_emb(klen, D_MODEL)
            # Same as TransfoXLModel.forward with same_length=False.
            mask = torch.triu(torch.ones((qlen, klen), dtype=torch.bool), diagonal=1 + mlen)[:, :, None]
            with torch.no_grad():
                out = layer(w, r, dec_attn_mask=mask, mems=mems if mlen > 0 else None)[0]
                if mlen == 0:  # a zero-length memory tensor gives the same result
                    out0 = layer(w, r, dec_attn_mask=mask, mems=mems)[0]
                    assert torch.equal(out, out0)
            assert out.shape == (qlen, bsz, D_MODEL)

            arrays = {
                "w": w.numpy(),
                "mems": mems.numpy(),
                "r": r.numpy(),
                "mask": mask.to(torch.float64).numpy(),
                "output": out.numpy(),
                "pre_lnorm": np.array(int(pre_lnorm)),
                "mlen": np.array(mlen),
            }
            arrays.update(_params(layer))
            _save(f"transfo_xl_layer_prelnorm{int(pre_lnorm)}_mem{memory}.npz", arrays)


MODEL_CONFIGS = {
    # name: (pre_lnorm, clamp_len, same_length, untie_r)
    "postln": (False, -1, False, True),
    "preln": (True, -1, False, True),
    "clamp": (False, 3, False, False),
    "samelength": (False, -1, True, True),
}


def make_model_goldens() -> None:
    vocab, n_layer, mem_len, bsz, seg_len, n_seg = 11, 2, 6, 2, 4, 3
    for i, (name, (pre_lnorm, clamp_len, same_length, untie_r)) in enumerate(MODEL_CONFIGS.items()):
        torch.manual_seed(2000 + i)
        config = TransfoXLConfig(
            vocab_size=vocab,
            cutoffs=[],
            d_model=D_MODEL,
            d_embed=D_MODEL,
            n_head=N_HEAD,
            d_head=D_HEAD,
            d_inner=D_INNER,
            div_val=1,
            pre_lnorm=pre_lnorm,
            n_layer=n_layer,
            mem_len=mem_len,
            clamp_len=clamp_len,
            same_length=same_length,
            untie_r=untie_r,
            adaptive=False,
            dropout=0.0,
            dropatt=0.0,
            layer_norm_epsilon=EPS,
        )
        model = TransfoXLModel(config).double()
        _reinit(model)
        model.eval()

        # Checks on the structure the docstring describes.
        emb = model.word_emb
        assert len(emb.emb_layers) == 1 and len(emb.emb_projs) == 0 and emb.emb_scale == D_MODEL**0.5
        for layer in model.layers:
            shared = layer.dec_attn.r_w_bias is getattr(model, "r_w_bias", None)
            assert shared == (not untie_r)

        input_ids = torch.randint(0, vocab, (bsz, seg_len * n_seg))
        arrays = {"input_ids": input_ids.numpy()}
        starts = {
            "": None,  # HF's own init: mem_len rows of zeros
            "emptystart_": [torch.zeros(0, bsz, D_MODEL) for _ in range(n_layer)],
        }
        for prefix, mems in starts.items():
            with torch.no_grad():
                for s in range(n_seg):
                    seg = input_ids[:, s * seg_len : (s + 1) * seg_len]
                    out = model(input_ids=seg, mems=mems, return_dict=True)
                    mems = out.mems
                    assert out.last_hidden_state.shape == (bsz, seg_len, D_MODEL)
                    arrays[f"{prefix}hidden_{s}"] = out.last_hidden_state.numpy()
                    for layer, m in enumerate(mems):
                        arrays[f"{prefix}mems_{s}_{layer}"] = m.numpy()
        arrays.update(
            {
                "pre_lnorm": np.array(int(pre_lnorm)),
                "clamp_len": np.array(clamp_len),
                "same_length": np.array(int(same_length)),
                "untie_r": np.array(int(untie_r)),
                "mem_len": np.array(mem_len),
                "n_layer": np.array(n_layer),
                "n_head": np.array(N_HEAD),
                "d_head": np.array(D_HEAD),
                "d_model": np.array(D_MODEL),
                "d_inner": np.array(D_INNER),
                "vocab_size": np.array(vocab),
                "seg_len": np.array(seg_len),
            }
        )
        arrays.update(_params(model))
        _save(f"transfo_xl_model_{name}.npz", arrays)


def main() -> None:
    assert transformers.__version__ == "4.35.0", transformers.__version__
    torch.set_default_dtype(torch.float64)
    _patch_float64_masking()
    os.makedirs(OUT_DIR, exist_ok=True)
    make_layer_goldens()
    make_model_goldens()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        OUT_DIR = sys.argv[1]
    main()
