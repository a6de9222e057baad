"""TransformerXL and TransformerXLBlock against HuggingFace's TransfoXL
(transformers 4.35.0), through the committed golden arrays of
`tests/goldens/make_transfo_xl_goldens.py` (float64, PyTorch's time-major
layout), loaded with `keras_relrec.migrate`. Where torch and transformers
4.35.0 are installed, the script is run again and must give the committed
arrays, and the HF-format checkpoint (config.json and model.safetensors)
that it saves of the "wt103" language model must be the committed one."""

import json
import os
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

from keras_relrec.layers import TransformerXL
from keras_relrec.layers import TransformerXLBlock
from keras_relrec.migrate import build_hf_transfo_xl
from keras_relrec.migrate import load_hf_transfo_xl
from keras_relrec.migrate import load_hf_transfo_xl_layer
from keras_relrec.migrate import read_safetensors
from keras_relrec.models import TransformerXLGenerator
from tests.layers.float64 import Precision
from tests.layers.float64 import float64_policy
from tests.migrate.weights import weights_bytes

GOLDENS = pathlib.Path(__file__).parent.parent / "goldens"
ATOL = 1e-5
FLOAT32_ATOL = 1e-4
LAYER_FILES = sorted(GOLDENS.glob("transfo_xl_layer_*.npz"))
MODEL_FILES = sorted(GOLDENS.glob("transfo_xl_model_*.npz"))
LM_FILES = sorted(GOLDENS.glob("transfo_xl_lm_*.npz"))
WT103_PARAMETERS = GOLDENS / "transfo_xl_wt103_parameters.npz"
CHECKPOINT = GOLDENS / "transfo_xl_lm_wt103_checkpoint"
CHECKPOINT_FILES = ["config.json", "model.safetensors"]


def params(golden):
    return {k[len("param/"):]: golden[k] for k in golden.files if k.startswith("param/")}


def batch_major(x):
    return np.swapaxes(x, 0, 1).astype("float32")


def test_goldens_are_committed():
    assert len(LAYER_FILES) == 4 and len(MODEL_FILES) == 4 and len(LM_FILES) == 3
    assert WT103_PARAMETERS.is_file()
    assert CHECKPOINT.is_dir() and sorted(p.name for p in CHECKPOINT.iterdir()) == CHECKPOINT_FILES


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
    for path in LAYER_FILES + MODEL_FILES + LM_FILES + [WT103_PARAMETERS]:
        fresh, committed = np.load(tmp_path / path.name), np.load(path)
        assert sorted(fresh.files) == sorted(committed.files)
        for key in committed.files:
            np.testing.assert_allclose(fresh[key], committed[key], rtol=0, atol=1e-12, err_msg=key)
    fresh_checkpoint = tmp_path / CHECKPOINT.name
    assert sorted(p.name for p in fresh_checkpoint.iterdir()) == CHECKPOINT_FILES
    config = json.loads((fresh_checkpoint / "config.json").read_text())
    assert config == json.loads((CHECKPOINT / "config.json").read_text())
    # Equal tensors, bit for bit, rather than equal bytes: another safetensors
    # release may lay out the same tensors differently.
    fresh, committed = (read_safetensors(folder / "model.safetensors") for folder in (fresh_checkpoint, CHECKPOINT))
    assert sorted(fresh) == sorted(committed)
    for name, array in committed.items():
        assert fresh[name].dtype == array.dtype and fresh[name].tobytes() == array.tobytes(), name
        np.testing.assert_array_equal(fresh[name], array, err_msg=name)


def hf_config(golden):
    """HF's TransfoXLConfig, as a dict, from a golden's scalars."""
    config = {key: golden[key].item() for key in (
        "vocab_size", "d_model", "d_embed", "div_val", "n_head", "d_head", "d_inner", "n_layer")}
    config.update(cutoffs=golden["cutoffs"].tolist(), tie_word_embeddings=bool(golden["tie_weight"]),
                  tie_projs=[bool(t) for t in golden["tie_projs"]])
    config.update(mem_len=golden["mem_len"].item(), clamp_len=golden["clamp_len"].item(),
                  same_length=bool(golden["same_length"]), pre_lnorm=bool(golden["pre_lnorm"]),
                  untie_r=bool(golden["untie_r"]))
    return config


@pytest.fixture(params=["float32", "float64"])
def precision(request):
    """float32, and the float64 policy (within 1e-10 of HF's float64)."""
    if request.param == "float32":
        yield Precision("float32")
        return
    with float64_policy():
        yield Precision("float64")


def language_model_for(golden):
    backbone, head = build_hf_transfo_xl(hf_config(golden), segment_len=golden["seg_len"].item())
    not_loaded = load_hf_transfo_xl(backbone, params(golden), head=head)
    assert not_loaded == ["transformer.pos_emb.inv_freq"]
    return backbone, head


@pytest.mark.parametrize("start", ["", "emptystart_"], ids=["zero_memory", "empty_memory"])
@pytest.mark.parametrize("path", LM_FILES, ids=lambda p: p.stem)
def test_the_language_model_matches_huggingface(path, start, precision):
    """TransfoXLLMHeadModel with adaptive input and adaptive softmax: the
    log-probabilities of every position and the per-position losses over
    three segments with memories, from HF's zero memory or an empty one.
    Float64 within 1e-10; float32 within 1e-4 (log-probabilities reach
    −100 and hidden states tens: float32 rounds them at a few 1e-6
    relative, compounded over the layers)."""
    golden = np.load(path)
    backbone, head = language_model_for(golden)
    assert backbone.count_params() + head.count_params() == golden["parameters"]
    tokens, batch, mem_len = golden["input_ids"], 2, golden["mem_len"].item()
    states = backbone.get_initial_state(batch) if start else (
        [np.zeros((batch, mem_len, golden["d_model"].item()))] * golden["n_layer"].item() + [np.ones((batch, mem_len))])
    states = [precision.array(s) for s in states]
    for s in range(3):
        segment = tokens[:, 4 * s : 4 * s + 4]
        hidden, states = backbone.streaming_step(segment, states)
        losses = head(hidden[:, :-1], targets=segment[:, 1:])
        for got, key in ((head(hidden), "logprobs"), (losses, "losses"), (np.mean(losses), "loss")):
            if precision.dtype == "float32":
                np.testing.assert_allclose(got, golden[f"{start}{key}_{s}"], rtol=1e-5, atol=FLOAT32_ATOL)
            else:
                precision.assert_close(got, golden[f"{start}{key}_{s}"], atol=ATOL)
        for layer in range(golden["n_layer"].item()):
            valid = np.asarray(states[-1], bool)
            memory = np.asarray(states[layer])[:, valid[0]]
            want = np.swapaxes(golden[f"{start}mems_{s}_{layer}"], 0, 1)[:, -memory.shape[1]:]
            if precision.dtype == "float32":
                np.testing.assert_allclose(memory, want, rtol=1e-5, atol=FLOAT32_ATOL)
            else:
                precision.assert_close(memory, want, atol=ATOL)


def test_ties_the_checkpoint_does_not_hold_are_refused():
    """A head built tied to the embedding, for a checkpoint whose softmax
    has tables of its own: the loader names the weight that differs."""
    golden = np.load(GOLDENS / "transfo_xl_lm_untied.npz")
    config = {**hf_config(golden), "tie_word_embeddings": True}
    backbone, head = build_hf_transfo_xl(config, segment_len=4)
    with pytest.raises(ValueError, match="crit.out_layers.0.weight"):
        load_hf_transfo_xl(backbone, params(golden), head=head)
    # A head tied to another model's embedding would keep that one's tables.
    wt103 = np.load(GOLDENS / "transfo_xl_lm_wt103.npz")
    backbone, _ = build_hf_transfo_xl(hf_config(wt103), segment_len=4)
    _, other_head = build_hf_transfo_xl(hf_config(wt103), segment_len=4)
    with pytest.raises(ValueError, match="tied to another embedding"):
        load_hf_transfo_xl(backbone, params(wt103), head=other_head)
    with pytest.raises(ValueError, match="adaptive input embeddings"):
        load_hf_transfo_xl(model_for(np.load(GOLDENS / "transfo_xl_model_postln.npz")), params(golden))


def test_an_hf_checkpoint_loads_end_to_end():
    """A folder as HF's `save_pretrained` writes it (config.json and
    model.safetensors in float32, without the tied names): built from its
    config, loaded, it gives HF's log-probabilities, and generates with its
    memories, the first new token HF's most likely one."""
    config = json.loads((CHECKPOINT / "config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of its keys is taken for a misspelling
        backbone, head = build_hf_transfo_xl(config, segment_len=4)
    not_loaded = load_hf_transfo_xl(backbone, read_safetensors(CHECKPOINT / "model.safetensors"), head=head)
    assert not_loaded == ["transformer.pos_emb.inv_freq"]
    golden = np.load(GOLDENS / "transfo_xl_lm_wt103.npz")
    tokens = golden["input_ids"]
    hidden, _ = backbone.streaming_step(tokens[:, :4], backbone.get_initial_state(2))
    want = golden["emptystart_logprobs_0"]
    # The checkpoint's weights are the goldens' rounded to float32.
    np.testing.assert_allclose(head(hidden), want, rtol=1e-5, atol=FLOAT32_ATOL)
    generated = TransformerXLGenerator(backbone, head).generate(tokens[:, :4], max_new_tokens=6)
    assert generated.shape == (2, 10)
    np.testing.assert_array_equal(generated[:, 4], want[:, -1].argmax(-1))


def test_settings_a_config_leaves_out_take_hfs_defaults():
    """As HF's own loading: div_val 4, same_length, clamp_len 1,000 and the
    ties of WT103 where the file says nothing; HF's older names read too."""
    config = {"n_token": 100, "cutoffs": [20, 40, 80], "d_model": 64, "d_embed": 64, "n_layer": 1, "n_head": 2,
              "d_head": 8, "d_inner": 32, "mem_len": 6}
    backbone, head = build_hf_transfo_xl(config, segment_len=4)
    assert backbone.vocabulary_size == 100 and backbone.embedding.div_val == 4
    block = backbone.blocks[0].get_config()
    assert block["same_length"] and block["clamp_len"] == 1000 and not backbone.tie_relative_biases
    assert head.tie_tables and head.tie_projections == [False, True, True, True]
    with pytest.raises(ValueError, match="tie_projs"):
        build_hf_transfo_xl({**config, "tie_projs": [True]}, segment_len=4)


def test_a_misspelt_setting_is_named():
    """A key close to one of TransfoXL's settings is not read: a warning
    names it and the setting, which takes HF's default."""
    config = {"n_token": 100, "cutoffs": [20, 40, 80], "d_model": 64, "d_embed": 64, "n_layers": 1, "n_head": 2,
              "d_head": 8, "d_inner": 32, "mem_len": 6}
    with pytest.warns(UserWarning, match=r"key 'n_layers' is none of TransfoXL's settings and is not read; did you "
                                         r"mean 'n_layer'\?"):
        backbone, _ = build_hf_transfo_xl(config, segment_len=4)
    assert backbone.num_layers == 18
