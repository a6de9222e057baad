"""One R-Transformer block: local recurrence, causal multi-head attention and
a feed-forward net, each a pre-norm residual sub-layer."""

import keras
from keras import ops

from keras_relrec.layers.local_recurrence.local_recurrence import LocalRecurrence
from keras_relrec.layers.local_recurrence.local_recurrence import map_chunks
from keras_relrec.ops import axis_size
from keras_relrec.ops import merge_heads
from keras_relrec.ops import roots
from keras_relrec.ops import scaled_dot_product_attention
from keras_relrec.ops import split_heads
from keras_relrec.ops import zero_masked
from keras_relrec.ops.relative_attention import relative_attention_mask
from keras_relrec.utils import initializers
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer
from keras_relrec.utils.same_shape import SameShapeAndMask

CELLS = {
    "gru": keras.layers.GRUCell,
    "lstm": keras.layers.LSTMCell,
    "simple_rnn": keras.layers.SimpleRNNCell,
}
NORMS = ("reference", "standard")


@register_layer
class RTransformerBlock(SameShapeAndMask, keras.layers.Layer):
    """A block of R-Transformer (Wang et al., "R-Transformer: Recurrent Neural
    Network Enhanced Transformer", 2019), as its public code computes it.

    For x (batch, T, d), N local-recurrence sub-layers, then causal multi-
    head attention, then a feed-forward net, each pre-norm and residual:

    ```
    x ← x + Drop(LocalRNN_n(LN_n(x)))        n = 1 … N   (`LocalRecurrence`, window M)
    x ← x + Drop(MHA(LN_a(x)))
    x ← x + Drop(W_2 Drop(ReLU(W_1 LN_f(x) + b_1)) + b_2)

    MHA(h) = concat_i(softmax(q_i k_iᵀ / sqrt(d/H) + causal) v_i) W_o + b_o,
             q = h W_q + b_q, k = h W_k + b_k, v = h W_v + b_v, H heads
    LN(x)  = a ⊙ (x − mean(x)) / (std(x) + ε) + b,   std unbiased (÷ (d − 1)), ε = 1e-6
    ```

    The recurrent cell of each local layer has d units and sees M − 1 zeros
    before the sequence. There is no position encoding: the local recurrence
    gives the order. `norm="reference"` is the layer norm of the public code
    above (unbiased standard deviation, ε added to it); `"standard"` is
    Keras' (x − mean) / sqrt(var + ε), which differs by a factor of about
    sqrt(d / (d − 1)). As in the public code there is no norm after the last
    sub-layer; a stack of blocks adds one if it wants it. The public code's
    caps (3,000 steps for its attention mask, about 10,000 for its index
    list) do not apply: any length runs.

    Masking: a masked step is as if absent from the local recurrence, no
    query attends to it, and its own output is zeros (the mask is passed on).

    Args:
        num_heads: H; must divide the input width d.
        window_size: M, the steps each local recurrence reads.
        num_local_layers: N (default 1); 0 gives the pre-norm Transformer
            block without local recurrence (the paper's ablation), which
            then knows no order but the causal mask's.
        cell: The local recurrence's cell: `"gru"` (default), `"lstm"` or
            `"simple_rnn"`, Keras' cells of d units (the public code's
            `GRU`, `LSTM` and tanh `RNN`).
        intermediate_dim: The feed-forward net's width (default 4·d).
        dropout: Rate of the sub-layers' outputs, the feed-forward hidden
            layer and the attention weights (one rate, as the public code).
        norm: `"reference"` (default) or `"standard"`; see above.
        epsilon: The layer norms' ε (default 1e-6).
        chunk_size: Optional C, to bound the memory of long sequences:
            passed to each `LocalRecurrence` (see its Memory), and the
            attention runs C queries at a time, in a loop whose gradient
            recomputes each chunk's weights (`keras.remat`), so that no
            (batch, heads, T, T) tensor is made or kept; the results are
            the same. In training the attention runs at once where the
            length is unknown when traced or where `dropout` > 0 (a
            recomputation would draw other masks). Default: all at once.
            Chunks trade time for memory: at thousands of steps they keep
            a training step's peak memory a fraction of what all at once
            needs, for up to about twice the time on TensorFlow (the
            figures, against the public PyTorch code too:
            `benchmarks/RESULTS.md`).
        kernel_initializer, recurrent_initializer, bias_initializer: Of the
            dense layers' and cells' kernels, the cells' recurrent kernels
            and every bias.
        seed: Seed of the dropout.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, T, d).
        mask: Optional boolean (batch, T), false for padding.
        training: Whether dropout applies.

    Returns:
        (batch, T, d).

    Example:

    ```python
    block = keras_relrec.layers.RTransformerBlock(num_heads=2, window_size=7, num_local_layers=2)
    y = block(np.random.rand(4, 64, 32))   # (4, 64, 32)
    ```
    """

    def __init__(
        self,
        num_heads,
        window_size,
        num_local_layers=1,
        cell="gru",
        intermediate_dim=None,
        dropout=0.0,
        norm="reference",
        epsilon=1e-6,
        chunk_size=None,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = validation.check_positive_int("num_heads", num_heads)
        self.window_size = validation.check_positive_int("window_size", window_size)
        self.num_local_layers = validation.check_non_negative_int("num_local_layers", num_local_layers)
        self.cell = validation.check_choice("cell", cell, tuple(CELLS))
        self.intermediate_dim = (
            None if intermediate_dim is None else validation.check_positive_int("intermediate_dim", intermediate_dim)
        )
        self.dropout = validation.check_rate("dropout", dropout)
        self.norm = validation.check_choice("norm", norm, NORMS)
        self.epsilon = validation.check_positive_float("epsilon", epsilon)
        self.chunk_size = None if chunk_size is None else validation.check_positive_int("chunk_size", chunk_size)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = validation.check_seed(seed)
        self.supports_masking = True

    def build(self, input_shape):
        input_spec = validation.sequence_input_spec(self, input_shape)
        width = input_shape[-1]
        if width % self.num_heads:
            raise ValueError(
                f"Argument `num_heads` must divide the input width {width}; received "
                f"num_heads={self.num_heads}."
            )
        self.input_spec = input_spec
        self.local_layers = [
            LocalRecurrence(
                CELLS[self.cell](
                    width,
                    kernel_initializer=clone_initializer(self.kernel_initializer, f"local_{n}"),
                    recurrent_initializer=clone_initializer(self.recurrent_initializer, f"local_{n}"),
                    bias_initializer=clone_initializer(self.bias_initializer, f"local_{n}"),
                    dtype=self.dtype_policy,
                    name=f"local_{n}_cell",
                ),
                self.window_size,
                chunk_size=self.chunk_size,
                dtype=self.dtype_policy,
                name=f"local_{n}",
            )
            for n in range(self.num_local_layers)
        ]
        names = [f"local_{n}" for n in range(self.num_local_layers)] + ["attention", "feed_forward"]
        self.norms = [self._norm(f"{name}_norm") for name in names]
        self.attention_dense = {
            part: initializers.dense(width, f"attention_{part}", self.kernel_initializer, self.bias_initializer,
                                     self.dtype_policy)
            for part in ("query", "key", "value", "output")
        }
        inner = self.intermediate_dim or 4 * width
        self.feed_forward_inner = initializers.dense(inner, "feed_forward_inner", self.kernel_initializer,
                                                     self.bias_initializer, self.dtype_policy)
        self.feed_forward_output = initializers.dense(width, "feed_forward_output", self.kernel_initializer,
                                                      self.bias_initializer, self.dtype_policy)
        self.dropout_layer = keras.layers.Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        shape = tuple(input_shape)
        for layer in (*self.local_layers, *self.norms, *self.attention_dense.values(), self.feed_forward_inner):
            layer.build(shape)
        self.feed_forward_output.build(shape[:-1] + (inner,))

    def _norm(self, name):
        if self.norm == "standard":
            return keras.layers.LayerNormalization(epsilon=self.epsilon, dtype=self.dtype_policy, name=name)
        return UnbiasedLayerNorm(self.epsilon, dtype=self.dtype_policy, name=name)

    def call(self, inputs, mask=None, training=None):
        validation.check_mask(self, mask, inputs)
        if mask is not None:
            mask = ops.cast(mask, "bool")
        # Padding is read as zeros, whatever it holds.
        x = zero_masked(ops.cast(inputs, self.compute_dtype), mask)
        for norm, local in zip(self.norms, self.local_layers):
            x = x + self.dropout_layer(local(norm(x), mask=mask, training=training), training=training)
        x = x + self.dropout_layer(self._attention(self.norms[-2](x), mask, training), training=training)
        hidden = self.dropout_layer(ops.relu(self.feed_forward_inner(self.norms[-1](x))), training=training)
        x = x + self.dropout_layer(self.feed_forward_output(hidden), training=training)
        return zero_masked(x, mask)

    def _attention(self, h, mask, training):
        query, key, value = (split_heads(self.attention_dense[part](h), self.num_heads)
                             for part in ("query", "key", "value"))
        steps = axis_size(h, 1)
        fits = isinstance(steps, int) and steps <= (self.chunk_size or steps)
        # In training, at once with attention dropout (a recomputation would
        # draw its mask again) or an unknown length (TensorFlow's XLA cannot
        # take the gradient of a loop of unknown length).
        if self.chunk_size is None or fits or (training and (self.dropout > 0 or not isinstance(steps, int))):
            # Causal, padding never attended: Transformer-XL's mask without memory.
            allowed = relative_attention_mask(steps, 0, key_valid=mask)
            attended = scaled_dot_product_attention(
                query, key, value, mask=allowed, dropout=lambda w: self.dropout_layer(w, training=training)
            )
        else:
            attended = self._chunked_attention(query, key, value, mask, steps)
        return self.attention_dense["output"](merge_heads(attended))

    def _chunked_attention(self, query, key, value, mask, steps):
        """The attention of C queries at a time, in a loop whose gradient
        recomputes each chunk's (batch, heads, C, T) weights (`keras.remat`)
        instead of keeping the (batch, heads, T, T) ones; each query's
        softmax is over the same keys as at once."""
        chunk = self.chunk_size
        count = (steps + chunk - 1) // chunk
        batch, heads, width = ops.shape(query)[0], query.shape[1], query.shape[-1]
        tail = ops.zeros((batch, heads, count * chunk - steps, width), query.dtype)
        queries = ops.reshape(ops.concatenate([query, tail], axis=2), (batch, heads, count, chunk, width))
        queries = ops.transpose(queries, (2, 0, 1, 3, 4))  # (count, batch, heads, C, d_k)
        key_positions = ops.arange(steps, dtype="int32")[None, :]
        key_valid = None if mask is None else mask[:, None, None, :]

        def one_chunk(i):
            def attend(queries, key, value):
                # Causal, padding never attended, as relative_attention_mask.
                allowed = ((i * chunk + ops.arange(chunk, dtype="int32"))[:, None] >= key_positions)[None, None]
                if key_valid is not None:
                    allowed = ops.logical_and(allowed, key_valid)
                return scaled_dot_product_attention(queries, key, value, mask=allowed)

            return keras.remat(attend)(ops.take(queries, i, axis=0), key, value)

        attended = map_chunks(one_chunk, count, (batch, heads, chunk, value.shape[-1]), value.dtype)
        attended = ops.reshape(ops.transpose(attended, (1, 2, 0, 3, 4)),
                               (batch, heads, count * chunk, value.shape[-1]))
        return attended[:, :, :steps]

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "window_size": self.window_size,
            "num_local_layers": self.num_local_layers,
            "cell": self.cell,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "norm": self.norm,
            "epsilon": self.epsilon,
            "chunk_size": self.chunk_size,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
        }
        return {**super().get_config(), **config}


class UnbiasedLayerNorm(keras.layers.Layer):
    """a ⊙ (x − mean) / (std + ε) + b over the last axis with the unbiased
    std, R-Transformer's layer norm; a part of `RTransformerBlock`."""

    def __init__(self, epsilon, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        width = input_shape[-1]
        if width < 2:
            raise ValueError(
                f"RTransformerBlock(norm='reference') needs at least 2 features (the unbiased std divides "
                f"by d − 1); received input of shape {tuple(input_shape)}."
            )
        # Keras' names, so that either norm loads the same way.
        self.gamma = self.add_weight(name="gamma", shape=(width,), initializer="ones")
        self.beta = self.add_weight(name="beta", shape=(width,), initializer="zeros")

    def call(self, x):
        # In float32 at least: float16's variance over d loses too much.
        dtype = at_least_float32(self.compute_dtype)
        x32 = ops.cast(x, dtype)
        centred = x32 - ops.mean(x32, axis=-1, keepdims=True)
        variance = ops.sum(ops.square(centred), axis=-1, keepdims=True) / (x.shape[-1] - 1)
        # 0 for a constant row (e.g. padding), with a finite gradient.
        std = roots.sqrt(variance)
        normed = centred / (std + self.epsilon)
        return ops.cast(normed * ops.cast(self.gamma, dtype) + ops.cast(self.beta, dtype), x.dtype)
