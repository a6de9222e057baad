"""One attention block of the relational memory core."""

import keras
from keras import ops

from keras_relrec.ops import merge_heads
from keras_relrec.ops import scaled_dot_product_attention
from keras_relrec.ops import split_heads
from keras_relrec.utils.initializers import clone_initializer


class RelationalMemoryBlock(keras.layers.Layer):
    """The attention block of Santoro et al.'s relational memory core, as
    DeepMind's Sonnet 1 reference computes it; `RelationalMemoryCell` runs
    `num_blocks` of them per step. For the rows Z of each example:

    ```
    [q_h, k_h, v_h] = LN_qkv(Z W_qkv + b_qkv) per head h   (LN over all heads)
    A_h = softmax(q_h k_hᵀ / sqrt(K))                      (over all rows)
    Z = LN_1(Z + [A_1 v_1, …, A_H v_H])                     (no output projection)
    Z = LN_2(Z + MLP(Z))
    ```

    The MLP is an argument of `call`, because the reference shares one MLP
    between all the blocks of a core; each block has its own qkv
    projection and three layer norms (`<name>_qkv`, `<name>_qkv_norm`,
    `<name>_attention_norm`, `<name>_mlp_norm`).

    Args:
        num_heads: H.
        key_size: K, the query and key width of a head.
        head_size: V, the value width of a head; the rows are H·V wide.
        epsilon: The layer norms' epsilon (the reference's is 1e-5).
        kernel_initializer, bias_initializer: Of the qkv projection.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        rows: (batch, rows, H·V).
        mlp: The dense layers of the MLP, ReLU between them, none after the
            last.
        queries: How many leading rows to compute outputs for (all rows
            still give keys and values); default all. The core's last
            block needs the memory rows only.

    Returns:
        (new rows (batch, queries, H·V), attention weights (batch, H,
        queries, rows)).
    """

    def __init__(self, num_heads, key_size, head_size, epsilon, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.key_size, self.head_size = num_heads, key_size, head_size
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.qkv = keras.layers.Dense(
            num_heads * (2 * key_size + head_size),
            kernel_initializer=clone_initializer(self.kernel_initializer, f"{self.name}_qkv"),
            bias_initializer=clone_initializer(self.bias_initializer, f"{self.name}_qkv"),
            dtype=self.dtype_policy,
            name=f"{self.name}_qkv",
        )
        self.qkv_norm, self.attention_norm, self.mlp_norm = (
            keras.layers.LayerNormalization(epsilon=epsilon, dtype=self.dtype_policy, name=f"{self.name}_{part}")
            for part in ("qkv_norm", "attention_norm", "mlp_norm")
        )

    def build(self, input_shape):
        width = input_shape[-1]
        self.qkv.build((None, width))
        self.qkv_norm.build((None, self.qkv.units))
        self.attention_norm.build((None, width))
        self.mlp_norm.build((None, width))

    def call(self, rows, mlp, queries=None):
        count, width = rows.shape[1], rows.shape[2]
        queries = count if queries is None else queries
        k = self.key_size
        # Dense layers see 2-D (rows, features) tensors: on TensorFlow a 3-D
        # input would go through a dynamic-shape tensordot whose gradient XLA
        # cannot compile inside the recurrent loop. Reshapes use -1 for the
        # batch, so the loop's graph has no shape ops (an empty batch works:
        # every other size is known and not zero).
        flat = ops.reshape(rows, (-1, width))
        qkv = self.qkv_norm(self.qkv(flat))
        qkv = split_heads(ops.reshape(qkv, (-1, count, self.qkv.units)), self.num_heads)
        # One split, not three slices: its gradient is one concatenation
        # instead of three zero-padded slices summed.
        q, key, value = ops.split(qkv, [k, 2 * k], axis=-1)
        if queries < count:
            q = q[:, :, :queries]
            flat = ops.reshape(rows[:, :queries], (-1, width))
        attended, weights = scaled_dot_product_attention(q, key, value, scale=k**-0.5, return_weights=True)
        attended = ops.reshape(merge_heads(attended), (-1, self.num_heads * self.head_size))
        z = self.attention_norm(flat + attended)
        h = z
        for index, layer in enumerate(mlp):
            h = layer(h)
            if index < len(mlp) - 1:
                h = ops.relu(h)
        z = self.mlp_norm(z + h)
        return ops.reshape(z, (-1, queries, width)), weights

    def compute_output_shape(self, input_shape, queries=None):
        batch, count, width = input_shape
        queries = count if queries is None else queries
        return (batch, queries, width), (batch, self.num_heads, queries, count)

    def get_config(self):
        config = {
            "num_heads": self.num_heads,
            "key_size": self.key_size,
            "head_size": self.head_size,
            "epsilon": self.qkv_norm.epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
