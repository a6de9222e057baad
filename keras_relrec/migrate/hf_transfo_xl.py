"""Loading HuggingFace TransfoXL weights (transformers ≤ 4.35) into
`TransformerXL`, `TransformerXLBlock` and `AdaptiveSoftmax`.

The state dict of `TransfoXLModel` (or of `TransfoXLLMHeadModel`, whose
backbone keys start with `transformer.`) as NumPy arrays. PyTorch's `Linear`
keeps its weight as (out, in): our kernels are its transpose. HF's `qkv_net`
computes [q | k | v] from the memory and the segment at once; we compute q
from the segment only and k, v from both, the same numbers.

| HuggingFace (layer i)                            | keras_relrec (`block_i`)                     |
|--------------------------------------------------|----------------------------------------------|
| word_emb.emb_layers.0.weight (plain)            | embedding.embeddings                         |
| word_emb.emb_layers.i.weight (adaptive)          | embedding.tables[i]                          |
| word_emb.emb_projs.i                             | embedding.projections[i] (transposed)        |
| layers.i.dec_attn.qkv_net.weight, rows [0, n)    | attention.query_kernel (transposed)          |
| layers.i.dec_attn.qkv_net.weight, rows [n, 3n)   | attention.key_value_kernel (transposed)      |
| layers.i.dec_attn.r_net.weight                   | attention.position_kernel (transposed)       |
| layers.i.dec_attn.o_net.weight                   | attention.output_kernel (transposed)         |
| layers.i.dec_attn.r_w_bias, r_r_bias (untie_r)   | attention.content_bias, position_bias        |
| r_w_bias, r_r_bias (not untie_r)                 | content_bias, position_bias of the backbone  |
| layers.i.dec_attn.layer_norm.{weight,bias}       | attention.norm.{gamma,beta}                  |
| layers.i.pos_ff.CoreNet.0.{weight,bias}          | intermediate.{kernel (transposed),bias}      |
| layers.i.pos_ff.CoreNet.3.{weight,bias}          | feed_forward_output.{kernel (transposed),bias} |
| layers.i.pos_ff.layer_norm.{weight,bias}         | feed_forward_norm.{gamma,beta}               |
| crit.out_layers.i.{weight,bias}                  | head.kernels[i] (or the tied table), head.biases[i] |
| crit.out_projs.i                                 | head.projections[i] (or the tied projection) |
| crit.cluster_weight, crit.cluster_bias           | head.cluster_kernel, head.cluster_bias       |

n = n_head · d_head; "layer i" rows read `block_i` of the backbone, "head"
the `AdaptiveSoftmax`. `pos_emb.inv_freq` is not a weight (the sinusoid's
frequencies, which the layers compute). HF ties a weight by listing one
tensor under two names (`crit.out_layers.i.weight` is
`word_emb.emb_layers.i.weight` with tie_word_embeddings; tie_projs ties
`crit.out_projs.i` to `word_emb.emb_projs.i`, or to `emb_projs.0` with
div_val = 1); a head built with the same ties reads the embedding's
variables, and the loader checks that the two names hold the same values.
`build_hf_transfo_xl` builds both layers from HF's configuration.

HF's `TransfoXLModel` called with `mems=None` starts from `mem_len`
positions of zeros that are attended; our `TransformerXL` starts from an
empty memory. To compute what HF computes from `mems=None`, start from
`initial_state=[zeros…, ones((batch, mem_len))]` (zeros that count).
"""

import difflib
import warnings

import numpy as np

from keras_relrec.layers import AdaptiveEmbedding
from keras_relrec.layers import AdaptiveSoftmax
from keras_relrec.layers import TransformerXL
from keras_relrec.migrate.state_dict import assign
from keras_relrec.migrate.state_dict import take

SOURCE = "HuggingFace"

# TransfoXLConfig's defaults in transformers 4.35 (the WT103 model's), for
# the settings a config leaves out.
HF_DEFAULTS = {
    "vocab_size": 267735, "cutoffs": [20000, 40000, 200000], "d_model": 1024, "d_embed": 1024, "n_head": 16,
    "d_head": 64, "d_inner": 4096, "div_val": 4, "pre_lnorm": False, "n_layer": 18, "mem_len": 1600,
    "clamp_len": 1000, "same_length": True, "untie_r": True, "sample_softmax": -1, "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
}


def _block_values(block, state_dict, prefix, used, own_biases):
    """[(Keras variable, value)] for one `TransformerXLBlock`."""
    attention = block.attention
    width, inner = attention.query_kernel.shape

    def get(name, shape):
        return take(state_dict, prefix + name, shape, used, SOURCE)

    qkv = get("dec_attn.qkv_net.weight", (3 * inner, width)).T
    values = [
        (attention.query_kernel, qkv[:, :inner]),
        (attention.key_value_kernel, qkv[:, inner:]),
        (attention.position_kernel, get("dec_attn.r_net.weight", (inner, width)).T),
        (attention.output_kernel, get("dec_attn.o_net.weight", (width, inner)).T),
        (attention.norm.gamma, get("dec_attn.layer_norm.weight", (width,))),
        (attention.norm.beta, get("dec_attn.layer_norm.bias", (width,))),
        (block.intermediate.kernel, get("pos_ff.CoreNet.0.weight", (block.intermediate_dim, width)).T),
        (block.intermediate.bias, get("pos_ff.CoreNet.0.bias", (block.intermediate_dim,))),
        (block.feed_forward_output.kernel, get("pos_ff.CoreNet.3.weight", (width, block.intermediate_dim)).T),
        (block.feed_forward_output.bias, get("pos_ff.CoreNet.3.bias", (width,))),
        (block.feed_forward_norm.gamma, get("pos_ff.layer_norm.weight", (width,))),
        (block.feed_forward_norm.beta, get("pos_ff.layer_norm.bias", (width,))),
    ]
    if own_biases:
        heads = (attention.num_heads, attention.head_size)
        values += [(attention.content_bias, get("dec_attn.r_w_bias", heads)),
                   (attention.position_bias, get("dec_attn.r_r_bias", heads))]
    return values


def load_hf_transfo_xl_layer(block, state_dict, prefix=""):
    """Loads one `RelPartialLearnableDecoderLayer`'s weights (keys
    `dec_attn.*`, `pos_ff.*` after `prefix`) into a built
    `TransformerXLBlock` with its own relative biases."""
    if block.attention.shared_relative_biases:
        raise ValueError(
            "load_hf_transfo_xl_layer needs a block with its own relative biases "
            "(shared_relative_biases=False); load shared ones into the backbone."
        )
    assign(_block_values(block, state_dict, prefix, set(), own_biases=True))


def _embedding_values(embedding, state_dict, prefix, used):
    """[(Keras variable, value)] of the token embedding: a plain one
    (div_val=1, d_embed=d_model, no projection) or an `AdaptiveEmbedding`."""
    keys = [k for k in state_dict if k.startswith(prefix + "word_emb.")]
    if not isinstance(embedding, AdaptiveEmbedding):
        adaptive = [k for k in keys if k != prefix + "word_emb.emb_layers.0.weight"]
        if adaptive:
            raise ValueError(
                "load_hf_transfo_xl: the state dict has adaptive input embeddings "
                f"{adaptive[:3]}; build the TransformerXL with embedding=AdaptiveEmbedding(...) of the "
                "checkpoint's vocab_size, cutoffs, div_val and d_embed (build_hf_transfo_xl does)."
            )
        shape = (embedding.input_dim, embedding.output_dim)
        return [(embedding.embeddings, take(state_dict, prefix + "word_emb.emb_layers.0.weight", shape, used,
                                            SOURCE))]
    values = []
    for i, (table, projection) in enumerate(zip(embedding.tables, embedding.projections)):
        values.append((table, take(state_dict, f"{prefix}word_emb.emb_layers.{i}.weight", table.shape, used,
                                   SOURCE)))
        if projection is not None:
            shape = tuple(reversed(projection.shape))
            values.append((projection, take(state_dict, f"{prefix}word_emb.emb_projs.{i}", shape, used,
                                            SOURCE).T))
    return values


def _softmax_values(head, embedding, state_dict, prefix, used):
    """[(Keras variable, value)] of `crit.*` in an `AdaptiveSoftmax`; the
    weights it shares with the embedding must be equal in the state dict
    (HF lists a tied tensor under both names)."""
    if not isinstance(head, AdaptiveSoftmax) or not head.built:
        raise ValueError(f"load_hf_transfo_xl: `head` must be a built AdaptiveSoftmax; received head={head!r}.")
    if head.tied_embedding not in (None, embedding):
        raise ValueError(
            "load_hf_transfo_xl: `head` is tied to another embedding than the model's; tie it to "
            "model.embedding (build_hf_transfo_xl does), or leave it untied."
        )
    clusters, values = head.clusters, []

    def tied(name, shape, their_name):
        """A weight the head shares (one tensor under two names in HF):
        used, and checked equal to the embedding's; HF's safetensors files
        keep it under the embedding's name only."""
        if name not in state_dict:
            return
        mine = take(state_dict, name, shape, used, SOURCE)
        theirs = np.asarray(state_dict.get(prefix + their_name))
        if theirs.shape != mine.shape or not np.array_equal(mine, theirs):
            raise ValueError(
                f"load_hf_transfo_xl: `head` shares '{name}' with the embedding, but the state dict's differs "
                f"from '{prefix + their_name}'; build the head with the checkpoint's ties (tie_word_embeddings, "
                "tie_projs)."
            )

    for i in range(clusters.table_count):
        name = f"crit.out_layers.{i}.weight"
        if head.tie_tables:
            tied(name, head.tied_embedding.tables[i].shape, f"word_emb.emb_layers.{i}.weight")
        else:
            values.append((head.kernels[i], take(state_dict, name, head.kernels[i].shape, used, SOURCE)))
        values.append((head.biases[i], take(state_dict, f"crit.out_layers.{i}.bias", head.biases[i].shape, used,
                                            SOURCE)))
    for i, projection in enumerate(head.projections):
        name = f"crit.out_projs.{i}"
        if projection is not None:
            values.append((projection, take(state_dict, name, projection.shape, used, SOURCE)))
        elif head.tied_embedding is not None and head.tie_projections[i] and clusters.projects(head.input_width):
            shape = (head.input_width, clusters.widths[i])
            tied(name, shape, f"word_emb.emb_projs.{clusters.table_index(i)}")
    if clusters.count > 1:
        values.append((head.cluster_kernel, take(state_dict, "crit.cluster_weight", head.cluster_kernel.shape,
                                                 used, SOURCE)))
        values.append((head.cluster_bias, take(state_dict, "crit.cluster_bias", head.cluster_bias.shape, used,
                                               SOURCE)))
    return values


def load_hf_transfo_xl(model, state_dict, head=None):
    """Loads a HuggingFace TransfoXL state dict into a built `TransformerXL`
    (and its adaptive softmax).

    Args:
        model: A built `keras_relrec.layers.TransformerXL` of the same
            configuration (n_layer, n_head, d_head, d_model, d_inner;
            `tie_relative_biases` = not `untie_r`; a plain token embedding,
            or an `AdaptiveEmbedding` of the checkpoint's vocab_size,
            cutoffs, div_val, d_embed): `build_hf_transfo_xl` makes one.
        state_dict: {name: array} of `TransfoXLModel` or
            `TransfoXLLMHeadModel` (PyTorch tensors converted with
            `.numpy()`).
        head: Optional built `AdaptiveSoftmax` with the checkpoint's
            clusters and ties, into which `crit.*` is loaded.

    Returns:
        The names that were not loaded (`pos_emb.inv_freq`; `crit.*`
        without a head).

    Raises:
        ValueError: a weight is missing, has another shape, is not numbers
            or holds a NaN or inf, the state dict's embedding is not the
            model's kind, a weight the head shares with the embedding
            differs from it, or the state dict holds weights this model has
            no place for; the weights are then left as they were.
    """
    if not model.built:
        raise ValueError("load_hf_transfo_xl needs a built TransformerXL: call it on an input first.")
    prefix = "transformer." if any(k.startswith("transformer.") for k in state_dict) else ""
    keys = [k[len(prefix):] for k in state_dict if k.startswith(prefix)]
    layers = {int(k.split(".")[1]) for k in keys if k.startswith("layers.")}
    if layers != set(range(model.num_layers)):
        raise ValueError(
            f"load_hf_transfo_xl: the state dict has {len(layers)} layers; the model has "
            f"{model.num_layers}."
        )
    used, values = set(), []
    if model.embedding is not None:
        values.extend(_embedding_values(model.embedding, state_dict, prefix, used))
    if model.tie_relative_biases:
        heads = tuple(model.content_bias.shape)
        for variable, name in ((model.content_bias, "r_w_bias"), (model.position_bias, "r_r_bias")):
            values.append((variable, take(state_dict, prefix + name, heads, used, SOURCE)))
        # HF lists the shared pair under every layer too.
        used.update(k for k in state_dict if k.endswith(("dec_attn.r_w_bias", "dec_attn.r_r_bias")))
    for n, block in enumerate(model.blocks):
        values.extend(_block_values(block, state_dict, f"{prefix}layers.{n}.", used,
                                    own_biases=not model.tie_relative_biases))
    if head is not None:
        values.extend(_softmax_values(head, model.embedding, state_dict, prefix, used))
    not_loaded = [k for k in state_dict if k not in used]
    unknown = [k for k in not_loaded if not k.startswith((prefix + "pos_emb.", "crit.", prefix + "crit."))
               or (head is not None and k.startswith("crit."))]
    if unknown:
        raise ValueError(f"load_hf_transfo_xl: the model has no place for the weights {unknown[:5]}.")
    assign(values)
    return not_loaded


def _warn_of_misspellings(config, settings):
    """Warns of each key of `config` that is not one of `settings` but
    close to one (a config.json holds many keys HF reads elsewhere, which
    are not warned of): its setting takes HF's default."""
    for key in config:
        if key not in settings and (close := difflib.get_close_matches(key, settings, n=1, cutoff=0.8)):
            warnings.warn(
                f"build_hf_transfo_xl: the config's key {key!r} is none of TransfoXL's settings and is not read; "
                f"did you mean {close[0]!r}? (Left out, a setting takes HF's default.)", stacklevel=3)


def build_hf_transfo_xl(config, segment_len, dtype=None):
    """A `TransformerXL` and its `AdaptiveSoftmax`, built to HuggingFace's
    TransfoXL configuration, ready for `load_hf_transfo_xl`.

    Args:
        config: HF's `TransfoXLConfig` as a dict (`config.to_dict()`, or the
            checkpoint's config.json): n_layer, n_head, d_head, d_model,
            d_inner, d_embed, vocab_size, cutoffs, div_val, mem_len,
            clamp_len, same_length, pre_lnorm, untie_r,
            layer_norm_epsilon, and the ties tie_word_embeddings (or
            tie_weight) and tie_projs (or proj_share_all_but_first); a
            setting left out takes HF's default (the WT103 model's), as
            HF's own loading does.
        segment_len: Positions per segment (HF's configuration has none:
            each call is a segment).
        dtype: Optional dtype policy of both layers.

    Returns:
        (backbone, head): the `TransformerXL` with an `AdaptiveEmbedding`,
        and the `AdaptiveSoftmax` that shares its weights as the config
        ties them; both built.
    """
    if not isinstance(config, dict):
        raise ValueError(
            f"Argument `config` must be HF's TransfoXLConfig as a dict (config.to_dict(), or the checkpoint's "
            f"config.json); received {type(config).__name__}."
        )
    # HF's names for the same settings (its attribute_map, and older files).
    aliases = {"n_token": "vocab_size", "hidden_size": "d_model", "num_attention_heads": "n_head",
               "num_hidden_layers": "n_layer", "tie_weight": "tie_word_embeddings"}
    _warn_of_misspellings(config, [*HF_DEFAULTS, *aliases, "tie_projs", "proj_share_all_but_first"])
    config = {**HF_DEFAULTS, **{aliases.get(key, key): value for key, value in config.items()}}
    if config["sample_softmax"] > 0:
        raise ValueError("build_hf_transfo_xl: a sampled softmax (sample_softmax > 0) is not built; received "
                         f"sample_softmax={config['sample_softmax']!r}.")
    cutoffs, div_val, d_model = list(config["cutoffs"]), config["div_val"], config["d_model"]
    embedding = AdaptiveEmbedding(config["vocab_size"], d_model, cutoffs=cutoffs, div_val=div_val,
                                  embedding_dim=config["d_embed"], dtype=dtype, name="embedding")
    clamp_len = config["clamp_len"]
    backbone = TransformerXL(
        num_layers=config["n_layer"], num_heads=config["n_head"], head_size=config["d_head"], hidden_dim=d_model,
        intermediate_dim=config["d_inner"], segment_len=segment_len, mem_len=config["mem_len"],
        clamp_len=clamp_len if clamp_len > 0 else None, same_length=bool(config["same_length"]),
        pre_lnorm=bool(config["pre_lnorm"]), tie_relative_biases=not config["untie_r"],
        epsilon=config["layer_norm_epsilon"], embedding=embedding, dtype=dtype,
    )
    tie_tables = bool(config["tie_word_embeddings"])
    # HF derives tie_projs from proj_share_all_but_first where a file has none.
    shared = bool(config.get("proj_share_all_but_first", True))
    tie_projections = [bool(t) for t in config.get("tie_projs", [False] + [shared] * len(cutoffs))]
    if len(tie_projections) != len(cutoffs) + 1:
        raise ValueError(
            f"Argument `config` has tie_projs={config['tie_projs']!r}: one per cluster, {len(cutoffs) + 1} for "
            f"cutoffs={cutoffs!r}."
        )
    tied = tie_tables or any(tie_projections)
    head = AdaptiveSoftmax(
        config["vocab_size"], cutoffs=cutoffs, div_val=div_val, embedding_dim=embedding.embedding_dim,
        tied_embedding=embedding if tied else None, tie_tables=tie_tables,
        tie_projections=tie_projections if tied else False, dtype=dtype, name="adaptive_softmax",
    )
    backbone.build((None, None))
    head.build((None, None, d_model))
    return backbone, head
