"""The relational memory core of Santoro et al. (2018)."""

import keras
from keras import ops

from keras_relrec.layers.relational.relational_memory_block import RelationalMemoryBlock
from keras_relrec.utils import initializers
from keras_relrec.utils import validation
from keras_relrec.utils.registration import register_layer

GATE_STYLES = ("unit", "memory", None)
# The reference normalises with Sonnet's LayerNorm, whose epsilon is 1e-5
# (Keras' default is 1e-3).
LAYER_NORM_EPSILON = 1e-5


@register_layer
class RelationalMemoryCell(keras.layers.Layer):
    """Relational memory core (RMC), a cell for `keras.layers.RNN`.

    Santoro et al., "Relational recurrent neural networks", NeurIPS 2018,
    computed exactly as DeepMind's reference (Sonnet 1 `RelationalMemory`).
    The memory M has N = `mem_slots` rows of width D = `num_heads` ·
    `head_size`. One step, with x̂ = x W_in + b_in (one row, or one row per
    input row with `input_rows`):

    ```
    Z = [M_{t-1}; x̂]                                 (N + r rows)
    for each of `num_blocks` blocks:
        [q_h, k_h, v_h] = LN_qkv(Z W_qkv + b_qkv) per head h   (LN over all heads)
        A_h = softmax(q_h k_hᵀ / sqrt(K))              (over all N + r rows)
        Z = LN_1(Z + [A_1 v_1, …, A_H v_H])
        Z = LN_2(Z + MLP(Z))                          (MLP shared by the blocks)
    M̃ = first N rows of Z
    G = tanh(M_{t-1}) W_gm + b_gm + flatten(x̂) W_gx + b_gx     (per slot)
    i = σ(G_i + input_bias),  f = σ(G_f + forget_bias)
    M_t = i ⊙ tanh(M̃) + f ⊙ M_{t-1}                  (gate_style "unit"/"memory")
    M_t = M̃                                          (gate_style None)
    output = flatten(M_t)
    ```

    The MLP has `attention_mlp_layers` dense layers of width D with ReLU
    between them and none after the last. Each block has its own qkv
    projection and three layer norms (epsilon 1e-5). With "unit" gates G has
    2·D columns per slot, with "memory" gates 2 (one gate value per slot,
    broadcast over its D columns). The initial memory is the identity, N×N,
    zero-padded or truncated to D columns. There is no output gate and no
    hidden state besides the memory, as in the reference code.

    States: `[memory, started]`. `memory` is M flattened to (batch, N·D) and
    is also the output, so masked steps behave alike on TensorFlow and JAX;
    `started` is 0 until the first step, and while it is 0 the cell reads the
    memory as the identity. The initial state is zeros: Keras' zero output
    for leading masked steps, and `reset_state()` of a stateful RNN (which
    assigns zeros) restores the identity memory.

    Weight paths (stable; a `keras.distribution.LayoutMap` matches them,
    for example `".*/block_\\d+_qkv/kernel"` to shard the largest kernels
    over a model axis), under `<rnn name>/<cell name>/`:
    `input_projection/{kernel,bias}`; per block k
    `block_<k>/block_<k>_qkv/{kernel,bias}` (D × (H·(2K + V))),
    `block_<k>/block_<k>_{qkv,attention,mlp}_norm/{gamma,beta}`; the shared
    MLP `mlp_<j>/{kernel,bias}` (D × D); the gates
    `gate_input/{kernel,bias}` and `gate_memory/{kernel,bias}`.

    Args:
        mem_slots: Positive int N, the number of memory rows.
        head_size: Positive int V, the value width of a head.
        num_heads: Positive int H. Default 1.
        num_blocks: Positive int, attention blocks per step. Default 1.
        forget_bias: Float added to the forget gate logits. Default 1.0.
        input_bias: Float added to the input gate logits. Default 0.0.
        gate_style: `"unit"` (default), `"memory"` or `None`.
        attention_mlp_layers: Positive int, layers of the MLP. Default 2.
        key_size: Positive int K, query and key width of a head; default
            `head_size`.
        input_rows: `None` (default) for inputs of shape (batch, features),
            each taken as one row; an int r for inputs (batch, r, features),
            each row projected and appended to the memory (the reference's
            `treat_input_as_matrix`).
        kernel_initializer, bias_initializer: Of every dense weight;
            defaults `"glorot_uniform"` and `"zeros"`.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: One step, (batch, features) or (batch, input_rows, features).
        states: `[memory, started]`, (batch, N·D) and (batch, 1).

    Returns:
        `(output, [memory, started])` with output = memory, (batch, N·D).

    Example:

    >>> import numpy as np, keras
    >>> from keras_relrec.layers import RelationalMemoryCell
    >>> cell = RelationalMemoryCell(mem_slots=4, head_size=8, num_heads=2)
    >>> rnn = keras.layers.RNN(cell)
    >>> tuple(rnn(np.zeros((3, 5, 10), "float32")).shape)
    (3, 64)
    """

    # The flat memory, the output, is states[0] (see
    # keras_relrec.export.graph.rnn_streamer).
    output_is_first_state = True

    def __init__(
        self,
        mem_slots,
        head_size,
        num_heads=1,
        num_blocks=1,
        forget_bias=1.0,
        input_bias=0.0,
        gate_style="unit",
        attention_mlp_layers=2,
        key_size=None,
        input_rows=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.mem_slots = validation.check_positive_int("mem_slots", mem_slots)
        self.head_size = validation.check_positive_int("head_size", head_size)
        self.num_heads = validation.check_positive_int("num_heads", num_heads)
        self.num_blocks = validation.check_positive_int("num_blocks", num_blocks)
        self.attention_mlp_layers = validation.check_positive_int(
            "attention_mlp_layers", attention_mlp_layers
        )
        self.key_size = validation.check_positive_int(
            "key_size", head_size if key_size is None else key_size
        )
        if input_rows is not None:
            input_rows = validation.check_positive_int("input_rows", input_rows)
        self.input_rows = input_rows
        self.gate_style = validation.check_choice("gate_style", gate_style, GATE_STYLES)
        self.forget_bias = validation.check_float("forget_bias", forget_bias)
        self.input_bias = validation.check_float("input_bias", input_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

        self.mem_size = self.num_heads * self.head_size
        self.state_size = [self.mem_slots * self.mem_size, 1]
        self.output_size = self.mem_slots * self.mem_size
        self.input_spec = keras.layers.InputSpec(ndim=2 if input_rows is None else 3)
        gate_width = {"unit": self.mem_size, "memory": 1, None: 0}[gate_style]
        self.gate_width = gate_width

        def dense(units, name):
            return initializers.dense(units, name, self.kernel_initializer, self.bias_initializer,
                                      self.dtype_policy)

        # Created in the reference's order (see keras_relrec.migrate).
        self.input_projection = dense(self.mem_size, "input_projection")
        self.blocks = [
            RelationalMemoryBlock(
                self.num_heads,
                self.key_size,
                self.head_size,
                epsilon=LAYER_NORM_EPSILON,
                kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer,
                dtype=self.dtype_policy,
                name=f"block_{b}",
            )
            for b in range(self.num_blocks)
        ]
        self.mlp = [
            dense(self.mem_size, f"mlp_{k}") for k in range(self.attention_mlp_layers)
        ]
        if gate_style is not None:
            self.gate_input = dense(2 * gate_width, "gate_input")
            self.gate_memory = dense(2 * gate_width, "gate_memory")

    def build(self, input_shape):
        rank = 2 if self.input_rows is None else 3
        expected = "(batch, features)" if rank == 2 else f"(batch, {self.input_rows}, features)"
        if (
            len(input_shape) != rank
            or input_shape[-1] is None
            or (rank == 3 and input_shape[1] != self.input_rows)
        ):
            raise ValueError(
                f"RelationalMemoryCell expects steps of shape {expected} (sequences "
                f"of shape (batch, time{', rows' if rank == 3 else ''}, features)); "
                f"received steps of shape {tuple(input_shape)}."
            )
        axes = {-1: input_shape[-1]}
        self.input_spec = keras.layers.InputSpec(ndim=rank, axes=axes)
        rows = 1 if self.input_rows is None else self.input_rows
        self.input_projection.build((None, input_shape[-1]))
        for block in self.blocks:
            block.build((None, None, self.mem_size))
        for layer in self.mlp:
            layer.build((None, self.mem_size))
        if self.gate_style is not None:
            self.gate_input.build((None, rows * self.mem_size))
            self.gate_memory.build((None, self.mem_size))

    def _identity(self, dtype):
        """Identity rows, zero-padded or truncated to the slot width; (N, D)."""
        return ops.eye(self.mem_slots, self.mem_size, dtype=dtype)

    def initial_memory(self, batch_size):
        """The reference's initial memory, (batch, N, D)."""
        eye = self._identity(self.compute_dtype)[None]
        return ops.broadcast_to(eye, (batch_size, self.mem_slots, self.mem_size))

    def get_initial_state(self, batch_size=None):
        return [
            ops.zeros((batch_size, self.state_size[0]), dtype=self.compute_dtype),
            ops.zeros((batch_size, 1), dtype=self.compute_dtype),
        ]

    def step(self, inputs, states):
        """One step; returns the new memory (batch, N, D), the new states and
        the attention weights of each block, (batch, heads, N + r, N + r),
        except the last block's, (batch, heads, N, N + r): the memory rows'
        attention over memory and input rows."""
        # -1 for the batch, never a size read at run time: an exported
        # file then reshapes to a constant shape (see export/tflite/static_reshapes).
        n, d = self.mem_slots, self.mem_size
        rows_in = 1 if self.input_rows is None else self.input_rows
        count = n + rows_in
        memory = ops.reshape(states[0], (-1, n, d))
        started = ops.reshape(states[1], (-1, 1, 1))
        # Not started: the identity memory (a constant the where broadcasts).
        memory = ops.where(started > 0.5, memory, self._identity(memory.dtype)[None])

        # Dense layers see 2-D tensors (see RelationalMemoryBlock.call).
        flat_input = ops.reshape(inputs, (-1, inputs.shape[-1]))
        projected = ops.reshape(self.input_projection(flat_input), (-1, rows_in, d))
        z = ops.concatenate([memory, projected], axis=1)
        attention = []
        for index, block in enumerate(self.blocks):
            # Only the memory rows of the last block are kept, and rows are
            # independent after the attention, so the last block computes
            # the input rows' keys and values but nothing else for them.
            queries = n if index == self.num_blocks - 1 else count
            z, weights = block(z, mlp=self.mlp, queries=queries)
            attention.append(weights)
        # The gating works on 2-D (batch·N, D) rows: XLA then reduces the
        # bias gradients over one leading axis (its fast column reduction)
        # instead of over (batch, N) of a 3-D tensor, which it runs as a slow
        # strided loop; the reshapes are free (row-major bitcasts).
        candidate = ops.reshape(z, (-1, d))  # the memory rows

        if self.gate_style is None:
            new_memory = candidate
        else:
            memory_rows = ops.reshape(memory, (-1, d))
            from_memory = self.gate_memory(ops.tanh(memory_rows))
            from_input = self.gate_input(ops.reshape(projected, (-1, rows_in * d)))
            width = 2 * self.gate_width
            gates = ops.reshape(
                ops.reshape(from_memory, (-1, n, width)) + from_input[:, None], (-1, width)
            )
            # One split, not two slices: its gradient is one concatenation
            # instead of two zero-padded halves summed.
            input_logits, forget_logits = ops.split(gates, 2, axis=-1)
            input_gate = ops.sigmoid(input_logits + self.input_bias)
            forget_gate = ops.sigmoid(forget_logits + self.forget_bias)
            new_memory = input_gate * ops.tanh(candidate) + forget_gate * memory_rows
        flat = ops.reshape(new_memory, (-1, self.output_size))
        new_memory = ops.reshape(new_memory, (-1, n, d))
        return new_memory, [flat, ops.ones_like(states[1])], attention

    def call(self, inputs, states):
        validation.check_cell_states(self, inputs, states)
        _, new_states, _ = self.step(inputs, states)
        return new_states[0], new_states

    def compute_output_shape(self, inputs_shape, states_shape=None):
        batch = inputs_shape[0]
        return (batch, self.output_size), [(batch, self.output_size), (batch, 1)]

    def get_config(self):
        config = {
            "mem_slots": self.mem_slots,
            "head_size": self.head_size,
            "num_heads": self.num_heads,
            "num_blocks": self.num_blocks,
            "forget_bias": self.forget_bias,
            "input_bias": self.input_bias,
            "gate_style": self.gate_style,
            "attention_mlp_layers": self.attention_mlp_layers,
            "key_size": self.key_size,
            "input_rows": self.input_rows,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
