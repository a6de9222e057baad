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

It writes ``transfo_xl_*.npz`` and the folder ``transfo_xl_lm_wt103_checkpoint`` into
``tests/goldens`` (or the folder given); ``tests/migrate/test_hf_transfo_xl.py`` runs it into a
temporary folder and compares with the committed files where torch and transformers 4.35.0 are
installed.  Everything runs in float64 (the checkpoint is float32, see below), in eval mode, with
dropout 0 and fixed seeds, so rerunning reproduces the same arrays.  To reproduce the committed
files byte for byte, set ``ATEN_CPU_CAPABILITY=avx2``: PyTorch's AVX512 kernels change the float64
outputs by about 1e-15 (the test compares to 1e-12).

Weights
-------
After construction every parameter is re-initialised so that none keeps a default value:
LayerNorm weights ``1 + 0.1 * N(0, 1)``, Linear/LayerNorm biases ``0.1 * N(0, 1)``, every other
parameter (Linear weights, the embedding table, ``r_w_bias``, ``r_r_bias``) ``0.3 * N(0, 1)``.
The rule goes by the last component of the parameter's name, so in the language-model goldens the
``crit.out_layers.{i}.bias`` vectors are biases (``0.1 * N(0, 1)``) while ``crit.cluster_weight``,
``crit.cluster_bias`` and the projections ``word_emb.emb_projs.{i}`` / ``crit.out_projs.{i}`` are
"other" parameters (``0.3 * N(0, 1)``).  Tied (shared) parameters are drawn once and stay shared.
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

Language-model goldens: ``transfo_xl_lm_{wt103,untied,div1}.npz``
----------------------------------------------------------------
``TransfoXLLMHeadModel``: the adaptive input embedding ``transformer.word_emb`` and the projected
adaptive log-softmax ``crit``, with vocab_size=100, cutoffs=[20, 40, 80] -- four clusters of token
ids, [0, 20) (the head), [20, 40), [40, 80), [80, 100) --, n_head=2, d_head=8, d_inner=32,
n_layer=2, mem_len=6, adaptive=True, sample_softmax=-1, dropout=dropatt=0, layer_norm_epsilon=1e-5
and per configuration::

    name     d_model  d_embed  div_val  clamp_len  same_length  untie_r  pre_lnorm  tie_weight  tie_projs
    wt103    64       64       4        5          True         True     False      True        [F, T, T, T]
    untied   32       64       4        -1         False        False    True       False       [F, F, F, F]
    div1     64       32       1        -1         False        True     False      True        [F, T, T, T]

``wt103`` is the layout of the WikiText-103 model, scaled down.  ``tie_weight`` is HF 4.35's
``tie_word_embeddings``; ``tie_projs`` is what ``proj_share_all_but_first=True`` (HF's default)
or ``False`` gives.  The script asserts the structure below.

* div_val > 1: cluster i has width ``d_i = d_embed // div_val**i`` (64, 16, 4, 1 here), its own
  table ``transformer.word_emb.emb_layers.{i}.weight`` (cluster size, d_i) and projection
  ``transformer.word_emb.emb_projs.{i}`` (d_model, d_i); the softmax has ``crit.out_layers.{i}``
  (``weight`` (cluster size, d_i), ``bias`` (cluster size,)) and ``crit.out_projs.{i}`` (d_model, d_i).
* div_val = 1: one table ``transformer.word_emb.emb_layers.0.weight`` (vocab, d_embed) and, as
  d_embed != d_model, one projection ``transformer.word_emb.emb_projs.0`` (d_model, d_embed); the
  softmax has one ``crit.out_layers.0`` (``weight`` (vocab, d_embed), ``bias`` (vocab,)), whose rows
  [l_i, r_i) serve cluster i, and four projections ``crit.out_projs.{0,1,2,3}``, each (d_model, d_embed).
* Both: ``crit.cluster_weight`` (3, d_embed) and ``crit.cluster_bias`` (3,), the head's scores for
  the three tail clusters.

Input embedding of token x in cluster i: ``table_i[x - l_i] @ emb_projs[i].T * sqrt(d_model)``
(``emb_projs[0]`` and the one table for div_val = 1).  Output, for a last hidden state h (d_model,):
the head scores ``(h @ out_projs[0]) @ [W_0; cluster_weight].T + [b_0; cluster_bias]`` (20 + 3
entries) go through a log-softmax; a head token's log-probability is its entry, a token x of
cluster i >= 1 gets ``head[20 + i - 1] + log_softmax((h @ out_projs[i]) @ W_i.T + b_i)[x - l_i]``,
where ``W_i``, ``b_i`` are ``crit.out_layers.{i}`` (div_val = 1: rows [l_i, r_i) of
``crit.out_layers.0``).  A projection P (d_model, d_i) is thus used as ``e @ P.T`` in the embedding
but as ``h @ P`` in the softmax.

Ties, as HF's ``TransfoXLLMHeadModel.tie_weights`` (run by ``post_init`` at construction) makes
them; the script asserts which tensors are the same objects, before and after re-initialisation:
with tie_weight, ``crit.out_layers[i].weight`` is ``transformer.word_emb.emb_layers[i].weight``
(biases are never tied); where ``tie_projs[i]``, ``crit.out_projs[i]`` is
``transformer.word_emb.emb_projs[i]`` (div_val > 1) or ``transformer.word_emb.emb_projs[0]``
(div_val = 1).  ``tie_projs[0]`` is False in every configuration, so the head's projection
``crit.out_projs.0`` is always the softmax's own -- also with div_val = 1, where the three tail
clusters share the input projection and the head does not.  The state dict, and so the
``param/...`` entries, list a tied tensor under every name (equal values); ``parameters`` counts it
once (the number of elements of ``model.parameters()``).

``input_ids`` (bsz=2, 12) are uniform over the vocabulary; every cluster occurs among them, and
even among the ids that the losses are about (a segment's tokens after its first; asserted).  They
are run as three segments of 4 tokens, feeding back the returned mems, from HF's start (prefix "")
and from a zero-length memory (prefix "emptystart_"), exactly as for the model goldens.  For each
segment s, two forwards from the same input memory give:

* ``{prefix}logprobs_{s}`` (bsz, 4, 100): ``prediction_scores`` of the forward without labels, the
  full log-probabilities over the vocabulary (each row's logsumexp is 0, asserted).
* ``{prefix}losses_{s}`` (bsz, 3): ``losses`` of the forward with ``labels`` = the segment's ids and
  ``crit.keep_order = True``, which keeps them in position order (without it HF returns them
  grouped by cluster).  HF shifts inside the segment: ``losses[b, t] = -log p(id[b, t + 1] | ids up
  to t)``, equal to ``-logprobs[b, t, id[b, t + 1]]`` (asserted to 1e-10); the segment's last token
  predicts nothing, and the next segment's first token is not predicted.
* ``{prefix}loss_{s}`` (): that forward's ``loss``, HF's mean over the nonzero entries of ``losses``
  -- here all bsz * 3 = 6 of them (asserted).
* ``{prefix}mems_{s}_{layer}`` (mlen, bsz, d_model): the memory returned after segment s, as for the
  model goldens (the forward with labels returns the same, asserted).

Scalars: ``vocab_size``, ``d_model``, ``d_embed``, ``div_val``, ``n_head``, ``d_head``, ``d_inner``,
``n_layer``, ``mem_len``, ``clamp_len``, ``same_length``, ``untie_r``, ``pre_lnorm``, ``seg_len``,
``tie_weight`` (0/1), ``parameters``; int arrays ``cutoffs`` (3,) and ``tie_projs`` (4,) (0/1).
With these weights the distributions are sharp: log-probabilities go down to about -30 (``wt103``),
-35 (``div1``) and -107 (``untied``: pre_lnorm, so the last hidden state is not normalised).

HF-format checkpoint: ``transfo_xl_lm_wt103_checkpoint/``
---------------------------------------------------------
The ``wt103`` language model above (the same model object, seed and re-initialised weights),
converted with ``.float()`` to float32 -- as published checkpoints are -- and written with
``model.save_pretrained(<folder>, safe_serialization=True)`` after its golden arrays: exactly the
files a user gets from HuggingFace, for testing a loader of real checkpoints.  Its weights are the
``param/...`` entries of ``transfo_xl_lm_wt103.npz`` rounded to float32.  The folder holds exactly
two files:

* ``config.json``: HF's ``TransfoXLConfig`` as ``save_pretrained`` writes it, i.e. only values that
  differ from ``PretrainedConfig``'s defaults (plus ``transformers_version`` and ``torch_dtype``
  "float32").  So ``tie_word_embeddings`` (True, the default) is NOT in it, and
  ``proj_share_all_but_first`` never is (the config stores ``tie_projs`` [false, true, true, true]
  instead); ``vocab_size``, ``cutoffs``, ``d_model``, ``d_embed``, ``div_val``, ``n_head``,
  ``d_head``, ``d_inner``, ``n_layer``, ``mem_len``, ``clamp_len``, ``same_length``, ``untie_r``,
  ``pre_lnorm``, ``adaptive``, ``sample_softmax`` and ``layer_norm_epsilon`` are (asserted).
  Nothing in it depends on the run (no path, no ``_name_or_path``), so it is written unchanged.
* ``model.safetensors``: the state dict in float32 (dtype "F32"; metadata ``{"format": "pt"}``),
  WITHOUT the tied copies.  Safetensors allows no aliased tensors, so ``save_pretrained`` keeps one
  name per shared tensor and drops the names that ``TransfoXLLMHeadModel._tied_weights_keys``
  matches (``crit.out_projs.<n>``, ``crit.out_layers.<n>.weight``): the file lacks exactly
  ``crit.out_layers.{0,1,2,3}.weight`` (= ``transformer.word_emb.emb_layers.{i}.weight``, as
  tie_word_embeddings) and ``crit.out_projs.{1,2,3}`` (= ``transformer.word_emb.emb_projs.{i}``,
  as tie_projs); the untied ``crit.out_projs.0`` and every ``crit.out_layers.{i}.bias`` are in it,
  and so is the buffer ``transformer.pos_emb.inv_freq``.  ``from_pretrained`` re-ties them from the
  config.  The script asserts the names, that every stored array equals the model's float32 state
  dict, and that ``TransfoXLLMHeadModel.from_pretrained`` gives back the same weights and ties.

``save_pretrained`` also writes ``generation_config.json`` (``{"_from_model_config": true,
"eos_token_id": 0, "transformers_version": "4.35.0"}``, derived from the config); the script
deletes it.  Two runs give byte-identical files.

WikiText-103 sizes: ``transfo_xl_wt103_parameters.npz``
-------------------------------------------------------
HF's default ``TransfoXLConfig()``, which is the WikiText-103 model (vocab 267,735, cutoffs
[20000, 40000, 200000], d_model = d_embed = 1024, div_val 4, 16 heads of 64, d_inner 4096, 18
layers, untie_r, tie_weight and tie_projs [F, T, T, T]; asserted), built as ``TransfoXLLMHeadModel``
on PyTorch's "meta" device (shapes only, no memory).  Keys, in numbers of parameter elements:
``parameters`` (the model's, tied ones once: 285,205,322), ``embedding`` (``transformer.word_emb``),
``layers`` (all ``transformer.layers``), ``softmax`` (``crit``'s own: ``cluster_weight``,
``cluster_bias``, the ``out_layers`` biases and the untied ``out_projs.0``), and ``r_biases`` (the
model-level ``r_w_bias`` + ``r_r_bias``) only where untie_r is False -- not here: untie_r is True
for this model, so its relative biases are counted in ``layers``.  The script asserts that the parts
add up to ``parameters``.  Also stored, for building the same model: ``vocab_size``, ``d_model``,
``d_embed``, ``div_val``, ``n_head``, ``d_head``, ``d_inner``, ``n_layer``, ``untie_r``,
``tie_weight`` and the int arrays ``cutoffs`` and ``tie_projs``.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import sys
import textwrap
import zipfile

import numpy as np
import safetensors.torch
import torch
import transformers
from transformers import TransfoXLConfig
from transformers.models.transfo_xl import modeling_transfo_xl as hf_txl
from transformers.models.transfo_xl.modeling_transfo_xl import RelPartialLearnableDecoderLayer
from transformers.models.transfo_xl.modeling_transfo_xl import RelPartialLearnableMultiHeadAttn
from transformers.models.transfo_xl.modeling_transfo_xl import TransfoXLLMHeadModel
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


def _starts(bsz: int, d_model: int, n_layer: int) -> dict:
    """The two starts of a model run, by key prefix: HF's own (mems=None,
    mem_len rows of zeros) and a zero-length memory."""
    return {"": None, "emptystart_": [torch.zeros(0, bsz, d_model) for _ in range(n_layer)]}


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


def _config(**settings) -> TransfoXLConfig:
    """A TransfoXLConfig of the goldens' heads and widths, without dropout."""
    return TransfoXLConfig(n_head=N_HEAD, d_head=D_HEAD, d_inner=D_INNER, dropout=0.0, dropatt=0.0,
                           layer_norm_epsilon=EPS, **settings)


def make_model_goldens() -> None:
    vocab, n_layer, mem_len, bsz, seg_len, n_seg = 11, 2, 6, 2, 4, 3
    for i, (name, (pre_lnorm, clamp_len, same_length, untie_r)) in enumerate(MODEL_CONFIGS.items()):
        torch.manual_seed(2000 + i)
        config = _config(
            vocab_size=vocab,
            cutoffs=[],
            d_model=D_MODEL,
            d_embed=D_MODEL,
            div_val=1,
            pre_lnorm=pre_lnorm,
            n_layer=n_layer,
            mem_len=mem_len,
            clamp_len=clamp_len,
            same_length=same_length,
            untie_r=untie_r,
            adaptive=False,
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
        starts = _starts(bsz, D_MODEL, n_layer)
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


LM_CUTOFFS = [20, 40, 80]

LM_CONFIGS = {
    # name: (d_model, d_embed, div_val, clamp_len, same_length, untie_r, pre_lnorm, tie_weight, tie_projs)
    # tie_weight is TransfoXLConfig's tie_word_embeddings; tie_projs True is proj_share_all_but_first=True
    # (HF's default, tie_projs=[False, True, True, True]), False gives tie_projs=[False] * 4.
    "wt103": (64, 64, 4, 5, True, True, False, True, True),
    "untied": (32, 64, 4, -1, False, False, True, False, False),
    "div1": (64, 32, 1, -1, False, True, False, True, True),
}


def _check_lm_ties(model: TransfoXLLMHeadModel) -> None:
    """The adaptive softmax shares exactly the tensors the config ties with the adaptive embedding."""
    config, emb, crit = model.config, model.transformer.word_emb, model.crit
    n_clusters = len(config.cutoffs) + 1
    n_tables = 1 if config.div_val == 1 else n_clusters
    assert len(emb.emb_layers) == n_tables and len(crit.out_layers) == n_tables
    # These configurations all have projections (div_val > 1, or d_embed != d_model).
    assert len(emb.emb_projs) == n_tables and len(crit.out_projs) == n_clusters
    assert len(config.tie_projs) == n_clusters
    for i, out_layer in enumerate(crit.out_layers):
        table = emb.emb_layers[i].weight
        tied = bool(config.tie_word_embeddings)
        assert (out_layer.weight is table) == tied and (out_layer.weight.data_ptr() == table.data_ptr()) == tied
        assert out_layer.bias is not None
    for i, proj in enumerate(crit.out_projs):
        source = emb.emb_projs[0 if config.div_val == 1 else i]
        tied = bool(config.tie_projs[i])
        assert (proj is source) == tied and (proj.data_ptr() == source.data_ptr()) == tied
        if not tied:
            assert all(proj is not p and proj.data_ptr() != p.data_ptr() for p in emb.emb_projs)


def make_lm_goldens() -> None:
    vocab, n_layer, mem_len, bsz, seg_len, n_seg = 100, 2, 6, 2, 4, 3
    for i, (name, cfg) in enumerate(LM_CONFIGS.items()):
        d_model, d_embed, div_val, clamp_len, same_length, untie_r, pre_lnorm, tie_weight, share_projs = cfg
        torch.manual_seed(3000 + i)
        config = _config(
            vocab_size=vocab,
            cutoffs=list(LM_CUTOFFS),
            d_model=d_model,
            d_embed=d_embed,
            div_val=div_val,
            pre_lnorm=pre_lnorm,
            n_layer=n_layer,
            mem_len=mem_len,
            clamp_len=clamp_len,
            same_length=same_length,
            untie_r=untie_r,
            adaptive=True,
            sample_softmax=-1,
            tie_word_embeddings=tie_weight,
            proj_share_all_but_first=share_projs,
        )
        tie_projs = [int(t) for t in config.tie_projs]
        assert config.tie_word_embeddings == tie_weight
        assert tie_projs == ([0, 1, 1, 1] if share_projs else [0, 0, 0, 0])
        model = TransfoXLLMHeadModel(config).double()  # post_init has applied tie_weights()
        _check_lm_ties(model)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        _reinit(model)
        model.eval()
        _check_lm_ties(model)  # _reinit copies in place: the ties survive
        for n, p in model.named_parameters():
            assert not torch.equal(p, before[n]), n

        input_ids = torch.randint(0, vocab, (bsz, seg_len * n_seg))
        targets = input_ids.view(bsz, n_seg, seg_len)[:, :, 1:]  # the ids the losses are about
        for lo, hi in zip([0] + LM_CUTOFFS, LM_CUTOFFS + [vocab]):
            assert ((targets >= lo) & (targets < hi)).any(), (name, lo, hi)
        arrays = {"input_ids": input_ids.numpy()}
        model.crit.keep_order = True  # per-position losses in position order
        starts = _starts(bsz, d_model, n_layer)
        for prefix, mems in starts.items():
            with torch.no_grad():
                for s in range(n_seg):
                    seg = input_ids[:, s * seg_len : (s + 1) * seg_len]
                    out = model(input_ids=seg, mems=mems, return_dict=True)
                    lab = model(input_ids=seg, mems=mems, labels=seg.clone(), return_dict=True)
                    logprobs, losses, loss = out.prediction_scores, lab.losses, lab.loss
                    assert logprobs.shape == (bsz, seg_len, vocab) and losses.shape == (bsz, seg_len - 1)
                    assert torch.allclose(logprobs.logsumexp(-1), torch.zeros(()), rtol=0, atol=1e-10)
                    want = -logprobs[:, :-1].gather(2, seg[:, 1:, None])[..., 0]
                    assert torch.allclose(losses, want, rtol=0, atol=1e-10), (name, prefix, s)
                    assert (losses != 0).all() and torch.allclose(loss, losses.mean(), rtol=0, atol=1e-12)
                    assert all(torch.equal(a, b) for a, b in zip(out.mems, lab.mems))
                    mems = out.mems
                    arrays[f"{prefix}logprobs_{s}"] = logprobs.numpy()
                    arrays[f"{prefix}losses_{s}"] = losses.numpy()
                    arrays[f"{prefix}loss_{s}"] = loss.numpy()
                    mlen = mem_len if prefix == "" else min(mem_len, (s + 1) * seg_len)
                    for layer, m in enumerate(mems):
                        assert m.shape == (mlen, bsz, d_model)
                        arrays[f"{prefix}mems_{s}_{layer}"] = m.numpy()
        arrays.update(
            {
                "vocab_size": np.array(vocab),
                "cutoffs": np.array(LM_CUTOFFS),
                "d_model": np.array(d_model),
                "d_embed": np.array(d_embed),
                "div_val": np.array(div_val),
                "n_head": np.array(N_HEAD),
                "d_head": np.array(D_HEAD),
                "d_inner": np.array(D_INNER),
                "n_layer": np.array(n_layer),
                "mem_len": np.array(mem_len),
                "clamp_len": np.array(clamp_len),
                "same_length": np.array(int(same_length)),
                "untie_r": np.array(int(untie_r)),
                "pre_lnorm": np.array(int(pre_lnorm)),
                "seg_len": np.array(seg_len),
                "tie_weight": np.array(int(tie_weight)),
                "tie_projs": np.array(tie_projs),
                "parameters": np.array(sum(p.numel() for p in model.parameters())),
            }
        )
        arrays.update(_params(model))
        _save(f"transfo_xl_lm_{name}.npz", arrays)
        if name == "wt103":
            _save_checkpoint(model)


CHECKPOINT = "transfo_xl_lm_wt103_checkpoint"
CHECKPOINT_FILES = ["config.json", "model.safetensors"]
# The tied copies that save_pretrained leaves out of model.safetensors (see the docstring).
CHECKPOINT_OMITS = [f"crit.out_layers.{i}.weight" for i in range(4)] + [f"crit.out_projs.{i}" for i in (1, 2, 3)]


def _save_checkpoint(model: TransfoXLLMHeadModel) -> None:
    """``save_pretrained`` of the float32 ``wt103`` model, less generation_config.json (see docstring)."""
    path = os.path.join(OUT_DIR, CHECKPOINT)
    model.float()  # in place: parameters keep their identity, so the ties survive
    _check_lm_ties(model)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert all(v.dtype == torch.float32 for v in state.values())
    model.save_pretrained(path, safe_serialization=True)
    os.remove(os.path.join(path, "generation_config.json"))
    assert sorted(os.listdir(path)) == CHECKPOINT_FILES, os.listdir(path)

    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    c = model.config
    expected = {
        "architectures": ["TransfoXLLMHeadModel"],
        "model_type": "transfo-xl",
        "torch_dtype": "float32",
        "transformers_version": "4.35.0",
        "vocab_size": 100,
        "cutoffs": LM_CUTOFFS,
        "adaptive": True,
        "sample_softmax": -1,
        "tie_projs": [False, True, True, True],
        **{k: getattr(c, k) for k in ("d_model", "d_embed", "div_val", "n_head", "d_head", "d_inner", "n_layer",
                                      "mem_len", "clamp_len", "same_length", "untie_r", "pre_lnorm",
                                      "layer_norm_epsilon")},
    }
    for key, value in expected.items():
        assert config[key] == value, (key, config.get(key), value)
    for key in ("tie_word_embeddings", "proj_share_all_but_first", "_name_or_path"):
        assert key not in config, key  # tie_word_embeddings: True is the default, so not written

    weights_path = os.path.join(path, "model.safetensors")
    with open(weights_path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
    assert header.pop("__metadata__") == {"format": "pt"}
    assert {v["dtype"] for v in header.values()} == {"F32"}
    assert sorted(set(state) - set(header)) == sorted(CHECKPOINT_OMITS), sorted(set(state) - set(header))
    assert set(header) <= set(state)
    stored = safetensors.torch.load_file(weights_path)
    assert all(torch.equal(stored[k], state[k]) for k in header)

    with torch.random.fork_rng():  # from_pretrained initialises weights randomly before loading
        loaded = TransfoXLLMHeadModel.from_pretrained(path, torch_dtype=torch.float32)
    _check_lm_ties(loaded)
    assert loaded.state_dict().keys() == state.keys()
    assert all(torch.equal(v, state[k]) for k, v in loaded.state_dict().items())
    sizes = ", ".join(f"{n} {os.path.getsize(os.path.join(path, n))} bytes" for n in CHECKPOINT_FILES)
    print(f"wrote {path} ({sizes}, {len(header)} tensors)")


WT103_PARAMETERS = 285_205_322


def make_wt103_parameter_counts() -> None:
    config = TransfoXLConfig()  # HF's defaults are the WikiText-103 model
    expected = dict(
        vocab_size=267_735,
        cutoffs=[20_000, 40_000, 200_000],
        d_model=1024,
        d_embed=1024,
        div_val=4,
        n_head=16,
        d_head=64,
        d_inner=4096,
        n_layer=18,
        mem_len=1600,
        clamp_len=1000,
        same_length=True,
        untie_r=True,
        pre_lnorm=False,
        adaptive=True,
        sample_softmax=-1,
        tie_word_embeddings=True,
        tie_projs=[False, True, True, True],
    )
    for key, value in expected.items():
        assert getattr(config, key) == value, (key, getattr(config, key))
    with torch.device("meta"):  # shapes only, no memory
        model = TransfoXLLMHeadModel(config)
    _check_lm_ties(model)

    def count(params) -> int:
        return sum(p.numel() for p in params)

    embedding = list(model.transformer.word_emb.parameters())
    shared = {id(p) for p in embedding}
    counts = {
        "parameters": count(model.parameters()),
        "embedding": count(embedding),
        "layers": count(model.transformer.layers.parameters()),
        "softmax": count(p for p in model.crit.parameters() if id(p) not in shared),
    }
    if not config.untie_r:
        counts["r_biases"] = count([model.transformer.r_w_bias, model.transformer.r_r_bias])
    assert counts["parameters"] == WT103_PARAMETERS, counts
    assert counts["parameters"] == sum(v for k, v in counts.items() if k != "parameters"), counts
    arrays = {k: np.array(v) for k, v in counts.items()}
    arrays.update(
        {
            "vocab_size": np.array(config.vocab_size),
            "cutoffs": np.array(config.cutoffs),
            "d_model": np.array(config.d_model),
            "d_embed": np.array(config.d_embed),
            "div_val": np.array(config.div_val),
            "n_head": np.array(config.n_head),
            "d_head": np.array(config.d_head),
            "d_inner": np.array(config.d_inner),
            "n_layer": np.array(config.n_layer),
            "untie_r": np.array(int(config.untie_r)),
            "tie_weight": np.array(int(config.tie_word_embeddings)),
            "tie_projs": np.array([int(t) for t in config.tie_projs]),
        }
    )
    _save("transfo_xl_wt103_parameters.npz", arrays)


def main() -> None:
    assert transformers.__version__ == "4.35.0", transformers.__version__
    torch.set_default_dtype(torch.float64)
    _patch_float64_masking()
    os.makedirs(OUT_DIR, exist_ok=True)
    make_layer_goldens()
    make_model_goldens()
    make_lm_goldens()
    make_wt103_parameter_counts()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        OUT_DIR = sys.argv[1]
    main()
