"""Loading HuggingFace TransfoXL weights (transformers ≤ 4.35) into
`TransformerXL` and `TransformerXLBlock`.

The state dict of `TransfoXLModel` (or of `TransfoXLLMHeadModel`, whose
backbone keys start with `transformer.`) as NumPy arrays. PyTorch's `Linear`
keeps its weight as (out, in): our kernels are its transpose. HF's `qkv_net`
computes [q | k | v] from the memory and the segment at once; we compute q
from the segment only and k, v from both, the same numbers.

| HuggingFace (layer i)                            | keras_relrec (`block_i`)                     |
|--------------------------------------------------|----------------------------------------------|
| word_emb.emb_layers.0.weight                     | embedding.embeddings                         |
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

n = n_head · d_head. `pos_emb.inv_freq` is not a weight (the sinusoid's
frequencies, which the layers compute). The output softmax (`crit.*`) is
not part of the backbone and is not loaded; with `cutoffs=[]` it is one
dense layer, `crit.out_layers.0.{weight,bias}`, that a `Dense(vocabulary)`
on top takes (transposed). Adaptive input embeddings (`div_val` ≠ 1,
cutoffs in the embedding, or `d_embed` ≠ `d_model`) are not built here and
are refused.

HF's `TransfoXLModel` called with `mems=None` starts from `mem_len`
positions of zeros that are attended; our `TransformerXL` starts from an
empty memory. To compute what HF computes from `mems=None`, start from
`initial_state=[zeros…, ones((batch, mem_len))]` (zeros that count).
"""

from keras_relrec.migrate.state_dict import assign
from keras_relrec.migrate.state_dict import take

SOURCE = "HuggingFace"


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


def load_hf_transfo_xl(model, state_dict):
    """Loads a HuggingFace TransfoXL state dict into a built `TransformerXL`.

    Args:
        model: A built `keras_relrec.layers.TransformerXL` of the same
            configuration (n_layer, n_head, d_head, d_model, d_inner,
            vocabulary; `tie_relative_biases` = not `untie_r`).
        state_dict: {name: array} of `TransfoXLModel` or
            `TransfoXLLMHeadModel` (PyTorch tensors converted with
            `.numpy()`).

    Returns:
        The names that were not loaded (`crit.*`, `pos_emb.inv_freq`).

    Raises:
        ValueError: a weight is missing, has another shape, is not numbers
            or holds a NaN or inf, the state dict uses adaptive input
            embeddings, or it holds weights this model has no place for; the
            model's weights are then left as they were.
    """
    if not model.built:
        raise ValueError("load_hf_transfo_xl needs a built TransformerXL: call it on an input first.")
    prefix = "transformer." if any(k.startswith("transformer.") for k in state_dict) else ""
    keys = [k[len(prefix):] for k in state_dict if k.startswith(prefix)]
    adaptive = [k for k in keys if k.startswith("word_emb.") and k != "word_emb.emb_layers.0.weight"]
    if adaptive:
        raise ValueError(
            "load_hf_transfo_xl loads a plain token embedding (div_val=1, d_embed=d_model); the "
            f"state dict has adaptive input embeddings: {adaptive[:3]}."
        )
    layers = {int(k.split(".")[1]) for k in keys if k.startswith("layers.")}
    if layers != set(range(model.num_layers)):
        raise ValueError(
            f"load_hf_transfo_xl: the state dict has {len(layers)} layers; the model has "
            f"{model.num_layers}."
        )
    used, values = set(), []
    if model.embedding is not None:
        shape = (model.vocabulary_size, model.hidden_dim)
        name = prefix + "word_emb.emb_layers.0.weight"
        values.append((model.embedding.embeddings, take(state_dict, name, shape, used, SOURCE)))
    if model.tie_relative_biases:
        heads = tuple(model.content_bias.shape)
        for variable, name in ((model.content_bias, "r_w_bias"), (model.position_bias, "r_r_bias")):
            values.append((variable, take(state_dict, prefix + name, heads, used, SOURCE)))
        # HF lists the shared pair under every layer too.
        used.update(k for k in state_dict if k.endswith(("dec_attn.r_w_bias", "dec_attn.r_r_bias")))
    for n, block in enumerate(model.blocks):
        values.extend(_block_values(block, state_dict, f"{prefix}layers.{n}.", used,
                                    own_biases=not model.tie_relative_biases))
    not_loaded = [k for k in state_dict if k not in used]
    unknown = [k for k in not_loaded if not k.startswith((prefix + "pos_emb.", "crit.", prefix + "crit."))]
    if unknown:
        raise ValueError(f"load_hf_transfo_xl: the model has no place for the weights {unknown[:5]}.")
    assign(values)
    return not_loaded
