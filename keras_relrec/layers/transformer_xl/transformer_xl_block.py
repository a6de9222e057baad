"""One Transformer-XL layer: relative attention, then a feed-forward net."""

import keras
from keras import ops

from keras_relrec.layers.transformer_xl.recalled_memory_attention import RecalledMemoryAttention
from keras_relrec.layers.transformer_xl.relative_multi_head_attention import check_clamp_len
from keras_relrec.ops import zero_masked
from keras_relrec.utils import initializers
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer


@register_layer
class TransformerXLBlock(keras.layers.Layer):
    """A Transformer-XL layer: `RelativeMultiHeadAttention` (with its
    residual and layer norm) and the position-wise feed-forward net.

    The attention also attends to segments recalled from anywhere in the
    past when the call gives their offsets (the segment cache, through
    `SegmentRecurrence`): keras-hub's `TransformerDecoder` likewise always
    holds the attention that takes a cache.

    Dai et al., "Transformer-XL: Attentive language models beyond a
    fixed-length context", ACL 2019, appendix B. For the segment h and the
    memory m:

    ```
    a = RelativeMultiHeadAttention(h, m)               (LN(h + attention))
    FF(a) = ReLU(a W_1 + b_1) W_2 + b_2
    y = LN(a + FF(a))                                   (post-LN, the default)
    y = a + FF(LN(a))                                   (pre_lnorm)
    ```

    Dropout acts after the ReLU and after W_2, as in the paper's code.

    Args:
        num_heads, head_size: Of the attention.
        intermediate_dim: The width of FF's hidden layer (d_inner).
        clamp_len, same_length, pre_lnorm, shared_relative_biases: As in
            `RelativeMultiHeadAttention`; `pre_lnorm` applies to both
            sub-layers.
        dropout: Dropout rate of the attention's and the FF's outputs and
            of FF's hidden layer.
        attention_dropout: Dropout rate of the attention weights.
        epsilon: The layer norms' epsilon.
        kernel_initializer: Of every kernel.
        bias_initializer: Of FF's biases.
        relative_bias_initializer: Of the attention's u and v.
        seed: Seed of the dropout.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs, memory, mask, memory_mask, relative_biases, training: As
            in `RelativeMultiHeadAttention`.
        memory_offsets, max_offset, memory_scale: For a memory of recalled
            segments: each slot's distance from the segment's first query,
            the largest of them (a Python int) and the factor on each
            slot's values.

    Returns:
        y (batch, L, d); with a memory, (y, the new memory).

    Example:

    ```python
    block = keras_relrec.layers.TransformerXLBlock(num_heads=2, head_size=8, intermediate_dim=32)
    outputs, memory = block(np.zeros((4, 5, 16)), memory=np.zeros((4, 3, 16)))
    ```
    """

    def __init__(
        self,
        num_heads,
        head_size,
        intermediate_dim,
        clamp_len=None,
        same_length=False,
        pre_lnorm=False,
        dropout=0.0,
        attention_dropout=0.0,
        shared_relative_biases=False,
        epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        relative_bias_initializer=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = validation.check_positive_int("intermediate_dim", intermediate_dim)
        self.pre_lnorm = validation.check_bool("pre_lnorm", pre_lnorm)
        self.dropout = validation.check_rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = validation.check_seed(seed)
        self.attention = RecalledMemoryAttention(
            num_heads,
            head_size,
            clamp_len=check_clamp_len(clamp_len),
            same_length=same_length,
            pre_lnorm=pre_lnorm,
            dropout=dropout,
            attention_dropout=attention_dropout,
            shared_relative_biases=shared_relative_biases,
            epsilon=epsilon,
            kernel_initializer=clone_initializer(self.kernel_initializer, "attention"),
            relative_bias_initializer=relative_bias_initializer,
            seed=seed,
            dtype=self.dtype_policy,
            name="attention",
        )
        self.feed_forward_dropout = keras.layers.Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        self.feed_forward_norm = keras.layers.LayerNormalization(
            epsilon=self.attention.epsilon, dtype=self.dtype_policy, name="feed_forward_norm"
        )
        self.supports_masking = True

    def build(self, inputs_shape, memory_shape=None):
        input_shape = inputs_shape
        self.attention.build(input_shape)
        self.input_spec = self.attention.input_spec
        width = input_shape[-1]

        def dense(name, units):
            return initializers.dense(units, name, self.kernel_initializer, self.bias_initializer,
                                      self.dtype_policy)

        self.intermediate = dense("intermediate", self.intermediate_dim)
        self.intermediate.build((None, width))
        self.feed_forward_output = dense("feed_forward_output", width)
        self.feed_forward_output.build((None, self.intermediate_dim))
        self.feed_forward_norm.build(input_shape)

    def call(self, inputs, memory=None, mask=None, memory_mask=None, relative_biases=None,
             memory_offsets=None, max_offset=None, memory_scale=None, training=None):
        attended = self.attention(inputs, memory=memory, mask=mask, memory_mask=memory_mask,
                                  relative_biases=relative_biases, memory_offsets=memory_offsets,
                                  max_offset=max_offset, memory_scale=memory_scale, training=training)
        attended, new_memory = attended if memory is not None else (attended, None)
        outputs = self._feed_forward(attended, training)
        outputs = zero_masked(outputs, mask) if mask is not None else outputs
        return outputs if memory is None else (outputs, new_memory)

    def _feed_forward(self, attended, training):
        hidden = self.feed_forward_norm(attended) if self.pre_lnorm else attended
        hidden = self.feed_forward_dropout(ops.relu(self.intermediate(hidden)), training=training)
        hidden = self.feed_forward_dropout(self.feed_forward_output(hidden), training=training)
        outputs = attended + hidden
        return outputs if self.pre_lnorm else self.feed_forward_norm(outputs)

    def decode(self, inputs, keys, values, cursor, distances, visible, position_table, relative_biases=None):
        """The block for L new positions over a ring of keys and values (the
        attention's `decode`): (outputs (batch, L, d), keys, values)."""
        attended, keys, values = self.attention.decode(inputs, keys, values, cursor, distances, visible,
                                                       position_table, relative_biases)
        return self._feed_forward(attended, False), keys, values

    def compute_mask(self, inputs, mask=None, memory=None, **kwargs):
        return mask if memory is None else (mask, None)

    def compute_output_shape(self, inputs_shape, memory_shape=None):
        return self.attention.compute_output_shape(inputs_shape, memory_shape)

    def get_config(self):
        attention = self.attention.get_config()
        config = {
            key: attention[key]
            for key in ("num_heads", "head_size", "clamp_len", "same_length", "attention_dropout",
                        "shared_relative_biases", "epsilon", "relative_bias_initializer")
        }
        config.update({
            "intermediate_dim": self.intermediate_dim,
            "pre_lnorm": self.pre_lnorm,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
        })
        return {**super().get_config(), **config}
