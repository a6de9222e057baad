"""Transformer-XL's attention sub-layer: relative positions and a memory."""

import keras
from keras import ops

from keras_relrec.ops import axis_size
from keras_relrec.ops import masked_softmax
from keras_relrec.ops import merge_heads
from keras_relrec.ops import scaled_dot_product_attention
from keras_relrec.ops import split_heads
from keras_relrec.ops import take_along_last_axis
from keras_relrec.ops import zero_masked
from keras_relrec.ops.relative_attention import relative_attention_mask
from keras_relrec.ops.relative_attention import relative_position_encoding
from keras_relrec.ops.relative_attention import relative_shift
from keras_relrec.ops.relative_attention import update_memory
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer


def check_clamp_len(clamp_len):
    if clamp_len is not None:
        validation.check_positive_int("clamp_len", clamp_len)
    return clamp_len


@register_layer
class RelativeMultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with relative positions over a memory and the
    current segment, with its residual and layer norm.

    Dai, Yang, Yang, Carbonell, Le and Salakhutdinov, "Transformer-XL:
    Attentive language models beyond a fixed-length context", ACL 2019,
    section 3.3 and appendix B. For the segment h (L positions) and the
    memory m (M earlier positions, m = h̃ of the paper), with
    h̃ = [m; h] and, per head,

    ```
    q = h W_q,   k = h̃ W_k,   v = h̃ W_v,   r = R W_r     (no biases)
    s_ij = ((q_i + u)·k_j + (q_i + v_b)·r_{M+i−j}) / sqrt(d_head)
    a = softmax_j(s) over the keys j visible to i          (causal: j ≤ M + i)
    o = [a_1 v_1, …, a_H v_H] W_o
    y = LN(h + o)                  (post-LN, the default)
    y = h + o, with LN(h̃) in place of h̃ in q, k, v   (pre_lnorm)
    ```

    R holds the sinusoids of the distances M + L − 1, …, 0 (sin block, then
    cos block; distances above `clamp_len` clamped). The position term is
    computed for every distance once and moved into place by the paper's
    shift (`keras_relrec.ops.relative_attention`). u (`content_bias`) and
    v_b (`position_bias`) are (H, d_head); with `shared_relative_biases`
    the layer has none and takes them as a call argument, so that a stack
    can share one pair (the paper's code ties them across layers unless
    `untie_r`).

    The memory is passed in and the next one returned, as keras-hub's
    `CachedMultiHeadAttention` takes and returns its cache: the new memory
    is the last M positions of [m; h], without gradient. This layer's
    memory is its own input h, before any layer norm.

    Range: q·k and the layer norm square the features, so features beyond
    about 1e18 in magnitude (about 1e2 under `mixed_float16`) overflow and
    give NaN, without an error; scale such inputs first.

    Masking: a mask (batch, L) marks padding in the segment and
    `memory_mask` (batch, M) the memory slots that hold positions (false
    for slots not filled yet): such keys get no attention, what a masked
    position holds is taken as zeros, and its output is zeros. Padded positions keep their
    place in the distances. With `same_length`, query i sees only the M
    keys nearest to it (distances 0 … M − 1), as HuggingFace's TransfoXL
    masks; the paper's TensorFlow code lets it see one more.

    Args:
        num_heads: H.
        head_size: d_head; the model width d need not be H · d_head.
        clamp_len: Distances above it use its encoding; None: no clamp.
        same_length: Every query sees the same number of keys (needs a
            memory).
        pre_lnorm: Layer norm before the attention instead of after the
            residual.
        dropout: Dropout rate of the attention's output, before the
            residual.
        attention_dropout: Dropout rate of the attention weights.
        shared_relative_biases: Take u and v_b from the call instead of
            owning them.
        epsilon: The layer norm's epsilon.
        kernel_initializer: Of W_q, W_k, W_v, W_r and W_o.
        relative_bias_initializer: Of u and v_b (the paper's code draws
            them from N(0, 0.02²)).
        seed: Seed of the dropout.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: The segment h, (batch, L, d).
        memory: Optional (batch, M, d): the memory m. Without it the layer
            attends within the segment and returns no memory.
        mask: Optional boolean (batch, L), false for padding.
        memory_mask: Optional boolean (batch, M), false for empty slots.
        relative_biases: (u, v_b), each (H, d_head), with
            `shared_relative_biases` only.
        training: Whether dropout is on.
        return_attention_scores: Whether to return a as well.

    Returns:
        y (batch, L, d); with a memory, (y, new memory (batch, M, d)); with
        `return_attention_scores`, a (batch, H, L, M + L) last.

    Example:

    ```python
    attention = keras_relrec.layers.RelativeMultiHeadAttention(num_heads=2, head_size=8)
    segment, memory = np.zeros((4, 5, 16)), np.zeros((4, 3, 16))
    outputs, memory = attention(segment, memory=memory)   # (4, 5, 16), (4, 3, 16)
    ```
    """

    def __init__(
        self,
        num_heads,
        head_size,
        clamp_len=None,
        same_length=False,
        pre_lnorm=False,
        dropout=0.0,
        attention_dropout=0.0,
        shared_relative_biases=False,
        epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        relative_bias_initializer=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = validation.check_positive_int("num_heads", num_heads)
        self.head_size = validation.check_positive_int("head_size", head_size)
        self.clamp_len = check_clamp_len(clamp_len)
        self.same_length = validation.check_bool("same_length", same_length)
        self.pre_lnorm = validation.check_bool("pre_lnorm", pre_lnorm)
        self.dropout = validation.check_rate("dropout", dropout)
        self.attention_dropout = validation.check_rate("attention_dropout", attention_dropout)
        self.shared_relative_biases = validation.check_bool("shared_relative_biases", shared_relative_biases)
        self.epsilon = validation.check_positive_float("epsilon", epsilon)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.relative_bias_initializer = keras.initializers.get(
            relative_bias_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.seed = validation.check_seed(seed)
        self.output_dropout = keras.layers.Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        self.weights_dropout = keras.layers.Dropout(self.attention_dropout, seed=self.seed, dtype=self.dtype_policy)
        self.norm = keras.layers.LayerNormalization(epsilon=self.epsilon, dtype=self.dtype_policy, name="norm")
        self.supports_masking = True

    def build(self, inputs_shape, memory_shape=None):
        input_shape = inputs_shape
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "RelativeMultiHeadAttention expects inputs (batch, steps, features) with a "
                f"known number of features; received input of shape {tuple(input_shape)}."
            )
        width = input_shape[-1]
        if width % 2:
            raise ValueError(
                "RelativeMultiHeadAttention needs an even number of features (the position "
                f"encoding has a sin and a cos half); received input of shape {tuple(input_shape)}."
            )
        self.input_spec = keras.layers.InputSpec(ndim=3, axes={-1: width})
        inner = self.num_heads * self.head_size

        def kernel(name, shape):
            return self.add_weight(name=name, shape=shape,
                                   initializer=clone_initializer(self.kernel_initializer, name))

        self.query_kernel = kernel("query_kernel", (width, inner))
        self.key_value_kernel = kernel("key_value_kernel", (width, 2 * inner))
        self.position_kernel = kernel("position_kernel", (width, inner))
        self.output_kernel = kernel("output_kernel", (inner, width))
        if not self.shared_relative_biases:
            self.content_bias, self.position_bias = (
                self.add_weight(name=name, shape=(self.num_heads, self.head_size),
                                initializer=clone_initializer(self.relative_bias_initializer, name))
                for name in ("content_bias", "position_bias")
            )
        self.norm.build(input_shape)

    def _check_call(self, inputs, mask, memory, memory_mask, relative_biases):
        validation.check_mask(self, mask, inputs)
        width = self.query_kernel.shape[0]
        if memory is not None and (len(memory.shape) != 3 or memory.shape[-1] != width):
            raise ValueError(
                f"RelativeMultiHeadAttention expects a memory of shape (batch, slots, {width}); "
                f"received memory of shape {tuple(memory.shape)}."
            )
        if memory is not None:
            validation.check_states_batch(self, inputs, [memory])
        if memory_mask is not None and (memory is None or tuple(memory_mask.shape) != tuple(memory.shape[:2])):
            raise ValueError(
                "RelativeMultiHeadAttention expects `memory_mask` of the memory's shape (batch, "
                f"slots); received memory_mask of shape {tuple(memory_mask.shape)} for memory "
                f"{None if memory is None else tuple(memory.shape)}."
            )
        if self.same_length and memory is None:
            raise ValueError(
                "RelativeMultiHeadAttention(same_length=True) sees the M nearest keys and needs "
                "a memory of M slots; received memory=None."
            )
        if self.shared_relative_biases != (relative_biases is not None):
            raise ValueError(
                "RelativeMultiHeadAttention takes `relative_biases` (u, v) in the call exactly when "
                f"built with shared_relative_biases=True; shared_relative_biases="
                f"{self.shared_relative_biases}, received relative_biases="
                f"{'None' if relative_biases is None else 'a pair'}."
            )
        if relative_biases is not None:
            self._check_relative_biases(relative_biases)

    def _check_relative_biases(self, relative_biases):
        """(u, v_b), each (num_heads, head_size): another shape would fail
        in the backend or be broadcast over the heads."""
        expected = (self.num_heads, self.head_size)
        shapes = [tuple(bias.shape) for bias in relative_biases]
        if shapes != [expected, expected]:
            raise ValueError(
                f"{type(self).__name__} expects `relative_biases` (u, v), each of shape (num_heads, head_size) = "
                f"{expected}; received shapes {shapes}. Give one (num_heads, head_size) weight for each, as the "
                "layer's own content_bias and position_bias."
            )

    def call(self, inputs, memory=None, mask=None, memory_mask=None, relative_biases=None, training=None,
             return_attention_scores=False):
        return self._call(inputs, memory, mask, memory_mask, relative_biases, training, return_attention_scores)

    def _call(self, inputs, memory, mask, memory_mask, relative_biases, training, return_attention_scores,
              recalled=None):
        """`call`, and for a subclass whose memory is not the positions just
        before the segment, `recalled`: what `_position_scores` and
        `_values` read of it."""
        self._check_call(inputs, mask, memory, memory_mask, relative_biases)
        inputs = zero_masked(ops.cast(inputs, self.compute_dtype), mask)
        memory_length = 0 if memory is None else memory.shape[1]
        if memory is not None:
            memory = zero_masked(ops.cast(memory, self.compute_dtype), memory_mask)
            context = ops.concatenate([memory, inputs], axis=1)
        else:
            context = inputs
        new_memory = None if memory is None else update_memory(memory, inputs)
        queries = axis_size(inputs, 1)
        if inputs.shape[1] == 0:  # nothing to attend from: no weights to read
            outputs = inputs
            scores = ops.zeros((ops.shape(inputs)[0], self.num_heads, 0, memory_length), self.compute_dtype)
        else:
            outputs, scores = self._attend(inputs, context, memory_length, queries, mask, memory_mask,
                                           relative_biases, recalled, training)
        result = (outputs,) if memory is None else (outputs, new_memory)
        if return_attention_scores:
            result += (scores,)
        return result[0] if len(result) == 1 else result

    def _attend(self, inputs, context, memory_length, queries, mask, memory_mask, relative_biases,
                recalled, training):
        width, inner = self.query_kernel.shape
        dtype = self.compute_dtype
        if self.pre_lnorm:
            context = self.norm(context)
        keys = memory_length + queries
        query = ops.matmul(context[:, memory_length:], ops.cast(self.query_kernel, dtype))
        key, value = ops.split(ops.matmul(context, ops.cast(self.key_value_kernel, dtype)), 2, axis=-1)
        positions = relative_position_encoding(self._table_size(keys, queries, recalled), width, self.clamp_len,
                                               dtype)
        position = ops.matmul(positions, ops.cast(self.position_kernel, dtype))
        query, key, value = (split_heads(t, self.num_heads) for t in (query, key, value))
        value = self._values(value, queries, recalled)
        position = split_heads(position[None], self.num_heads)[0]  # (H, table, d_head)
        u, v = relative_biases if relative_biases is not None else (self.content_bias, self.position_bias)
        u, v = ops.cast(u, dtype)[None, :, None], ops.cast(v, dtype)[None, :, None]
        scale = self.head_size**-0.5
        position_scores = self._position_scores(ops.einsum("bhid,hjd->bhij", query + v, position), queries,
                                                recalled) * scale
        key_valid = None
        if mask is not None or memory_mask is not None:
            batch = ops.shape(inputs)[0]
            memory_valid = (ops.ones((batch, memory_length), "bool") if memory_mask is None
                            else ops.cast(memory_mask, "bool"))
            current_valid = ops.ones((batch, queries), "bool") if mask is None else ops.cast(mask, "bool")
            key_valid = ops.concatenate([memory_valid, current_valid], axis=1)
        visible = relative_attention_mask(queries, memory_length, key_valid,
                                          memory_length if self.same_length else None)
        attended, scores = scaled_dot_product_attention(
            query + u, key, value, mask=visible, scale=scale, bias=position_scores,
            dropout=lambda a: self.weights_dropout(a, training=training), return_weights=True,
        )
        attended = ops.matmul(merge_heads(attended), ops.cast(self.output_kernel, dtype))
        outputs = inputs + self.output_dropout(attended, training=training)
        if not self.pre_lnorm:
            outputs = self.norm(outputs)
        # Padding gives zeros, as it reads them.
        return zero_masked(outputs, mask), scores

    # Decoding (inference, fixed weights): the memory kept as its keys and
    # values in a ring of slots, so that a step projects only its own
    # positions and writes them over the oldest slots.
    def project_memory(self, memory, memory_mask=None):
        """(keys, values) of the memory's slots, each (batch, H, M, d_head):
        [k; v] = m̃ [W_k, W_v], m̃ = LN(m) with `pre_lnorm`."""
        memory = zero_masked(ops.cast(memory, self.compute_dtype), memory_mask)
        if self.pre_lnorm:
            memory = self.norm(memory)
        key_value = ops.matmul(memory, ops.cast(self.key_value_kernel, self.compute_dtype))
        return tuple(split_heads(t, self.num_heads) for t in ops.split(key_value, 2, axis=-1))

    def position_table(self, length):
        """r = R W_r for the distances length − 1, …, 0: (H, length,
        d_head), what a decoding step reads its position terms from."""
        width = self.query_kernel.shape[0]
        dtype = self.compute_dtype
        positions = relative_position_encoding(length, width, self.clamp_len, dtype)
        return split_heads(ops.matmul(positions, ops.cast(self.position_kernel, dtype))[None], self.num_heads)[0]

    def decode(self, inputs, keys, values, cursor, distances, visible, position_table, relative_biases=None):
        """This layer's output for L new positions over a ring of slots that
        hold earlier positions' keys and values (`project_memory`): every
        query attends to the slots it may see and to the new positions up to
        itself, then the new positions' keys and values are written into the
        slots from `cursor` on. The same as `call` with the memory the slots
        stand for.

        Args:
            inputs: (batch, L, d), every position valid.
            keys, values: The ring, each (batch, H, S, d_head).
            cursor: The slot of the first new position (an int32 scalar).
            distances: Integer (L, S + L): the distance of each slot, then
                of each new position, from each query.
            visible: Boolean, broadcastable to (batch, 1, L, S + L): what
                each query may attend to.
            position_table: `position_table(T)`, T above every visible
                distance.
            relative_biases: (u, v_b), with `shared_relative_biases`.

        Returns:
            (outputs (batch, L, d), keys, values): the ring after the write.
        """
        dtype = self.compute_dtype
        inputs = ops.cast(inputs, dtype)
        normed = self.norm(inputs) if self.pre_lnorm else inputs
        query = split_heads(ops.matmul(normed, ops.cast(self.query_kernel, dtype)), self.num_heads)
        new_key, new_value = ops.split(ops.matmul(normed, ops.cast(self.key_value_kernel, dtype)), 2, axis=-1)
        new_key, new_value = (split_heads(t, self.num_heads) for t in (new_key, new_value))
        u, v = relative_biases if relative_biases is not None else (self.content_bias, self.position_bias)
        u, v = ops.cast(u, dtype)[None, :, None], ops.cast(v, dtype)[None, :, None]
        slots, table = keys.shape[2], position_table.shape[1]
        columns = (table - 1) - ops.clip(ops.cast(distances, "int32"), 0, table - 1)
        position_scores = ops.einsum("bhid,hjd->bhij", query + v, position_table)
        position_scores = take_along_last_axis(position_scores, columns[None, None])
        scores = ops.concatenate([ops.einsum("bhid,bhjd->bhij", query + u, ops.cast(keys, dtype)),
                                  ops.einsum("bhid,bhjd->bhij", query + u, new_key)], axis=-1)
        weights = masked_softmax((scores + position_scores) * self.head_size**-0.5, visible, axis=-1)
        attended = (ops.einsum("bhij,bhjd->bhid", weights[..., :slots], ops.cast(values, dtype))
                    + ops.einsum("bhij,bhjd->bhid", weights[..., slots:], new_value))
        outputs = inputs + ops.matmul(merge_heads(attended), ops.cast(self.output_kernel, dtype))
        # Read, then written: the ring is updated in place.
        keys, values = write_slots(keys, new_key, cursor, axis=2), write_slots(values, new_value, cursor, axis=2)
        return (outputs if self.pre_lnorm else self.norm(outputs)), keys, values

    def _table_size(self, keys, queries, recalled):
        """How many distances the position table holds: one per key."""
        return keys

    def _values(self, value, queries, recalled):
        """The values (batch, H, M + L, d_head) as the heads read them."""
        return value

    def _position_scores(self, scores, queries, recalled):
        """(batch, H, L, table) scores of every distance moved to their keys
        (batch, H, L, M + L): the paper's shift."""
        return relative_shift(scores)

    def compute_mask(self, inputs, mask=None, memory=None, **kwargs):
        if memory is None:
            return mask
        return (mask, None)

    def compute_output_shape(self, inputs_shape, memory_shape=None):
        if memory_shape is None:
            return tuple(inputs_shape)
        return tuple(inputs_shape), tuple(memory_shape)

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "head_size": self.head_size,
            "clamp_len": self.clamp_len,
            "same_length": self.same_length,
            "pre_lnorm": self.pre_lnorm,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "shared_relative_biases": self.shared_relative_biases,
            "epsilon": self.epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "relative_bias_initializer": keras.initializers.serialize(self.relative_bias_initializer),
            "seed": self.seed,
        }
        return {**super().get_config(), **config}


def write_slots(ring, new, cursor, axis):
    """`ring` with the L entries of `new` along `axis` written into its
    slots cursor, cursor + 1, … (mod the slots; the latest wins where L
    exceeds them)."""
    slots, length = ring.shape[axis], new.shape[axis]
    new = ops.cast(new, ring.dtype)
    if length == 1:  # a token step: one slot, written in place
        # int32 zeros: under JAX's x64 a Python 0 would be int64, the
        # cursor int32.
        zero, cursor = ops.zeros((), "int32"), ops.cast(cursor, "int32")
        return ops.slice_update(ring, [cursor if a == axis else zero for a in range(len(ring.shape))], new)
    offset = ops.mod(ops.arange(slots, dtype="int32") - cursor, slots)
    source = ops.clip(offset + slots * ((length - 1 - offset) // slots), 0, length - 1)
    written = ops.reshape(offset < length, (slots,) + (1,) * (len(ring.shape) - axis - 1))
    return ops.where(written, ops.take(new, source, axis=axis), ring)
