"""TransformerXL and TransformerXLBlock against HuggingFace's TransfoXL
(transformers 4.35.0), through the committed golden arrays of
`tests/goldens/make_transfo_xl_goldens.py` (float64, PyTorch's time-major
layout), loaded with `keras_relrec.migrate`. Where torch and transformers
4.35.0 are installed, the script is run again and must give the committed
arrays."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from keras_relrec.layers import TransformerXL
from keras_relrec.layers import TransformerXLBlock
from keras_relrec.migrate import load_hf_transfo_xl
from keras_relrec.migrate import load_hf_transfo_xl_layer
from tests.migrate.weights import weights_bytes

GOLDENS = pathlib.Path(__file__).parent.parent / "goldens"
ATOL = 1e-5
LAYER_FILES = sorted(GOLDENS.glob("transfo_xl_layer_*.npz"))
MODEL_FILES = sorted(GOLDENS.glob("transfo_xl_model_*.npz"))


def params(golden):
    return {k[len("param/"):]: golden[k] for k in golden.files if k.startswith("param/")}


def batch_major(x):
    return np.swapaxes(x, 0, 1).astype("float32")


def test_goldens_are_committed():
    assert len(LAYER_FILES) == 4 and len(MODEL_FILES) == 4


@pytest.mark.parametrize("path", LAYER_FILES, ids=lambda p: p.stem)
def test_one_layer_matches_huggingface(path):
    golden = np.load(path)
    block = TransformerXLBlock(num_heads=2, head_size=8, intermediate_dim=32, pre_lnorm=bool(golden["pre_lnorm"]))
    w = batch_major(golden["w"])
    memory = batch_major(golden["mems"]) if int(golden["mlen"]) else None
    block(w, memory=memory)
    load_hf_transfo_xl_layer(block, params(golden))
    output = block(w, memory=memory)
    output = output[0] if memory is not None else output
    np.testing.assert_allclose(output, batch_major(golden["output"]), atol=ATOL)


def model_for(golden):
    model = TransformerXL(
        num_layers=int(golden["n_layer"]),
        num_heads=int(golden["n_head"]),
        head_size=int(golden["d_head"]),
        hidden_dim=int(golden["d_model"]),
        intermediate_dim=int(golden["d_inner"]),
        segment_len=int(golden["seg_len"]),
        mem_len=int(golden["mem_len"]),
        vocabulary_size=int(golden["vocab_size"]),
        clamp_len=int(golden["clamp_len"]) if int(golden["clamp_len"]) > 0 else None,
        same_length=bool(golden["same_length"]),
        pre_lnorm=bool(golden["pre_lnorm"]),
        tie_relative_biases=not bool(golden["untie_r"]),
        return_state=True,
    )
    model(golden["input_ids"])
    not_loaded = load_hf_transfo_xl(model, params(golden))
    assert not_loaded == ["pos_emb.inv_freq"]
    return model


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_the_model_matches_huggingface_from_an_empty_memory(path):
    """HF from zero-length memories (0 → 4 → 6 → 6 positions): our start,
    whole and segment by segment."""
    golden = np.load(path)
    model, tokens = model_for(golden), golden["input_ids"]
    whole, *_ = model(tokens)
    want = np.concatenate([golden[f"emptystart_hidden_{s}"] for s in range(3)], axis=1)
    np.testing.assert_allclose(whole, want, atol=ATOL)
    states = None
    for s in range(3):
        output, *states = model(tokens[:, 4 * s : 4 * s + 4], initial_state=states)
        np.testing.assert_allclose(output, golden[f"emptystart_hidden_{s}"], atol=ATOL)
        filled = golden[f"emptystart_mems_{s}_0"].shape[0]
        np.testing.assert_array_equal(states[-1], np.arange(6)[None].repeat(2, 0) >= 6 - filled)
        for layer in range(2):
            np.testing.assert_allclose(
                np.asarray(states[layer])[:, 6 - filled :], batch_major(golden[f"emptystart_mems_{s}_{layer}"]),
                atol=ATOL,
            )


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_the_model_matches_huggingface_from_its_zero_memory(path):
    """HF's `mems=None`: mem_len positions of zeros that are attended, which
    our model computes from zero memories whose slots all count."""
    golden = np.load(path)
    model, tokens = model_for(golden), golden["input_ids"]
    states = [np.zeros((2, 6, 16), "float32")] * 2 + [np.ones((2, 6), "float32")]
    whole, *_ = model(tokens, initial_state=states)
    want = np.concatenate([golden[f"hidden_{s}"] for s in range(3)], axis=1)
    np.testing.assert_allclose(whole, want, atol=ATOL)
    for s in range(3):
        output, *states = model(tokens[:, 4 * s : 4 * s + 4], initial_state=states)
        np.testing.assert_allclose(output, golden[f"hidden_{s}"], atol=ATOL)
        for layer in range(2):
            np.testing.assert_allclose(states[layer], batch_major(golden[f"mems_{s}_{layer}"]), atol=ATOL)


def test_adaptive_embeddings_and_missing_weights_are_refused():
    golden = np.load(GOLDENS / "transfo_xl_model_postln.npz")
    model = model_for(golden)
    weights = params(golden)
    with pytest.raises(ValueError, match="adaptive input embeddings"):
        load_hf_transfo_xl(model, {**weights, "word_emb.emb_projs.0": np.zeros((16, 16))})
    del weights["layers.1.pos_ff.CoreNet.3.bias"]
    with pytest.raises(ValueError, match="layers.1.pos_ff.CoreNet.3.bias"):
        load_hf_transfo_xl(model, weights)
    weights = params(golden)
    weights["layers.0.dec_attn.o_net.weight"] = np.zeros((16, 8))
    with pytest.raises(ValueError, match=r"o_net.weight' must have shape \(16, 16\)"):
        load_hf_transfo_xl(model, weights)


@pytest.mark.parametrize("bad, problem", [("a", "holds dtype <U1"), (np.nan, "holds 16 non-finite")])
def test_a_bad_last_array_is_refused_before_any_weight_is_written(bad, problem):
    """Strings or NaN in the last array read: a ValueError naming it, and
    not one of the 28 arrays before it written."""
    golden = np.load(GOLDENS / "transfo_xl_model_postln.npz")
    model = model_for(golden)
    weights = {k: v + 1 for k, v in params(golden).items()}
    weights["layers.1.dec_attn.r_r_bias"] = np.full((2, 8), bad)
    before = weights_bytes(model)
    with pytest.raises(ValueError, match=f"key 'layers.1.dec_attn.r_r_bias' {problem}"):
        load_hf_transfo_xl(model, weights)
    assert weights_bytes(model) == before


def reference_python():
    """A Python with torch and transformers 4.35.0: $REFERENCE_PYTHON (what
    `make test-parity` sets up), or this one if it has them."""
    for python in (os.environ.get("REFERENCE_PYTHON"), sys.executable):
        check = "import torch, transformers; assert transformers.__version__ == '4.35.0'"
        if python and subprocess.run([python, "-c", check], capture_output=True).returncode == 0:
            return python
    return None


REFERENCE_PYTHON = reference_python()


# The live rerun: `make test-parity` (and `make test-slow`).
@pytest.mark.slow
@pytest.mark.skipif(REFERENCE_PYTHON is None, reason="needs torch and transformers 4.35.0: make test-parity")
def test_live_goldens_equal_the_committed_ones(tmp_path):
    """HuggingFace's TransfoXL, run now, gives the committed arrays."""
    script = GOLDENS / "make_transfo_xl_goldens.py"
    subprocess.run([REFERENCE_PYTHON, str(script), str(tmp_path)], check=True, capture_output=True)
    for path in LAYER_FILES + MODEL_FILES:
        fresh, committed = np.load(tmp_path / path.name), np.load(path)
        assert sorted(fresh.files) == sorted(committed.files)
        for key in committed.files:
            np.testing.assert_allclose(fresh[key], committed[key], rtol=0, atol=1e-12, err_msg=key)
