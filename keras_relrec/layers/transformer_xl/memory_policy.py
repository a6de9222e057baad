"""The base of what a `SegmentRecurrence` remembers between segments."""

import keras

# Masks travel as float32 states: the dtype every exported runtime takes.
MASK_DTYPE = "float32"


class MemoryPolicy(keras.layers.Layer):
    """What a `SegmentRecurrence` keeps between segments and what each of
    its blocks attends to: its states, their read before a segment and
    their update after it. `FifoMemory` (Transformer-XL) and
    `SegmentCache` are the two; the recurrence runs the blocks, the policy
    decides their memory, as a `keras.layers.RNN` runs the loop and its
    cell the step.

    A policy belongs to one recurrence, which calls `configure` from its
    constructor with its geometry and `build_parts` from its `build`; then

    - `state_specs()`: [(name, shape without batch, dtype)] of the states;
    - `read(hidden, mask, states, stack, training)`: for a segment
      (batch, L, d) and the states before it, one dict of call arguments
      per block (`memory`, `memory_mask`, and for recalled segments
      `memory_offsets`, `max_offset`, `memory_scale`; empty: no memory);
      `stack(hidden)` runs the blocks without memory, for a policy that
      reads the segment through them first;
    - `update(states, layer_inputs, outputs, mask, steps)`: the states
      after the segment, from each block's input and the last one's
      output; the first `steps` positions belong to the sequence, the
      rest is the padding of a call's last segment. The recurrence
      refuses, naming the state, states other than `state_specs()` (their
      count, shapes with the batch first, dtypes).

    `runs_short_segments`: whether a call or streaming chunk of known
    length shorter than a segment runs as a segment of its own (the same
    as padding it, for a memory of positions that leaves the padding out);
    False where a state holds whole segments. `supports_same_length`:
    whether blocks may see a fixed number of keys (`same_length`).
    """

    runs_short_segments = True
    supports_same_length = False

    def configure(self, num_layers, segment_len, hidden_dim, dtype_policy, kernel_initializer, bias_initializer):
        """Takes the recurrence's geometry: its blocks, segment length, width,
        dtype policy and the initializers of any weight of the policy."""
        if getattr(self, "num_layers", None) is not None:
            raise ValueError(
                f"The memory policy '{self.name}' already belongs to a SegmentRecurrence; give each layer its "
                "own policy (or its config)."
            )
        self.num_layers, self.segment_len, self.hidden_dim = num_layers, segment_len, hidden_dim
        # The policy computes in its recurrence's dtype, whatever it was made with.
        self.dtype_policy = dtype_policy

    @property
    def state_dtype(self):
        """The dtype of the states but the masks: the compute dtype."""
        return self.compute_dtype

    def build_parts(self, segment_shape):
        """Builds the policy's weights, for segments of `segment_shape`,
        under its recurrence's name scope: a policy's own `build` would put
        its name in their paths, and 0.2 saved the cache's summary as the
        recurrence's."""
        self.built = True

    def get_build_config(self):
        # Its recurrence configures and builds it: a config restores the
        # arguments alone.
        return None

    def state_specs(self):
        raise NotImplementedError

    def read(self, hidden, mask, states, stack, training):
        raise NotImplementedError

    def update(self, states, layer_inputs, outputs, mask, steps):
        raise NotImplementedError

    def segment_valid(self, hidden, mask):
        """(batch, L) float: 1 where a position of the segment is valid."""
        if mask is None:
            return keras.ops.ones(keras.ops.shape(hidden)[:2], MASK_DTYPE)
        return keras.ops.cast(mask, MASK_DTYPE)
