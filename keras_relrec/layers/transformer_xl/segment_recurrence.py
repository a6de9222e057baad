"""A stack of Transformer-XL blocks that runs a sequence segment by segment,
with a memory policy that decides what it remembers between segments."""

import math
import warnings

import keras
from keras import ops

from keras_relrec.layers.streaming_layer import StreamingLayer
from keras_relrec.layers.transformer_xl.fifo_memory import FifoMemory
from keras_relrec.layers.transformer_xl.memory_policy import MemoryPolicy
from keras_relrec.layers.transformer_xl.relative_multi_head_attention import check_clamp_len
from keras_relrec.layers.transformer_xl.relative_multi_head_attention import write_slots
from keras_relrec.layers.transformer_xl.transformer_xl_block import TransformerXLBlock
from keras_relrec.ops import any_valid
from keras_relrec.ops import axis_size
from keras_relrec.ops import lookup_rows
from keras_relrec.ops import loops
from keras_relrec.ops import micro_forms
from keras_relrec.ops import zero_masked
from keras_relrec.utils import state_variables
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer


@register_layer
class SegmentRecurrence(keras.layers.Layer, StreamingLayer):
    """`num_layers` `TransformerXLBlock`s run over a long sequence one
    segment of `segment_len` positions at a time, each attending to what a
    **memory policy** keeps of the segments before: `FifoMemory(mem_len)`
    (Transformer-XL: each layer's last positions) or `SegmentCache(...)`
    (the N last segments, the k most relevant recalled). `TransformerXL`
    and `SegmentCacheTransformer` are this layer with one policy each, as
    `keras.layers.RNN` is a loop that takes a cell.

    Dai et al., "Transformer-XL: Attentive language models beyond a
    fixed-length context", ACL 2019. For segment τ and layer n, with the
    policy's states s_τ:

    ```
    h_τ^0 = E[x_τ] · sqrt(d)   (tokens; features are taken as they are)
    memory_τ^n = read(s_τ)_n
    h_τ^n = TransformerXLBlock_n(h_τ^(n−1), memory_τ^n)
    s_(τ+1) = update(s_τ, h_τ^0 … h_τ^(m−1), h_τ^m)
    ```

    The layer embeds token ids (or takes features), cuts a sequence into
    segments, the last one padded at the end with masked positions (or,
    where the policy allows, a sequence of known length shorter than a
    segment runs as it is), runs them in turn (outside training a loop,
    whose body is traced and compiled once; unrolled in training and in an
    export of a known length: `keras_relrec.ops.loops`) and keeps the
    states of a segment with no valid position, as a masked step keeps an
    RNN's state. It behaves like a `keras.layers.RNN` whose step is a
    segment and whose state is the policy's: `initial_state`, `return_state`, `stateful` with
    `reset_state()` (truncated back-propagation over segments, as the
    paper trains: gradients stop at the memory), and streaming as a
    `StreamingLayer` with one segment per step (SavedModel `step`, TFLite
    streaming). Masking: a masked position is never attended, its output
    is zeros, and it keeps its place in the distances. With a `FifoMemory`
    of mem_len > 0, decoding (inference) can keep each memory as its keys and values
    instead (`key_value_cache`, `call_with_cache`): a step then projects
    only its own positions, as `TransformerXLGenerator` does.

    Args:
        num_layers: Number of blocks.
        num_heads: Attention heads per block.
        head_size: Width of a head.
        hidden_dim: d, the model width (even).
        intermediate_dim: Width of the feed-forward nets.
        segment_len: L, positions per segment.
        memory: The memory policy (`FifoMemory`, `SegmentCache`) or its
            config; it belongs to this layer alone.
        vocabulary_size: With it, the inputs are token ids and the layer
            embeds them (scaled by sqrt(d), as the paper); without it, the
            inputs are (batch, steps, hidden_dim) features. Ids must lie in
            0 … vocabulary_size − 1, padding included: an eager call
            refuses others with a `ValueError`; under a trace (`fit`,
            `predict`, tf.function, jit, export) they are assumed valid,
            unchecked, and an id outside gives whatever the backend's gather
            gives (an error, zeros or another row).
        clamp_len, same_length, pre_lnorm: As in `TransformerXLBlock`
            (`same_length` with a `FifoMemory` of positions only).
        tie_relative_biases: One u and v for every layer (the paper's code
            without `untie_r`) instead of one pair per layer.
        dropout: Dropout rate of the embedding and in every block.
        attention_dropout: Dropout rate of the attention weights.
        epsilon: The layer norms' epsilon.
        kernel_initializer, bias_initializer: Of the blocks and of the
            policy's weights.
        relative_bias_initializer: Of the blocks' u and v.
        embeddings_initializer: Of the token embedding.
        embedding: Optional token embedding layer (or its config) in place
            of the plain one, e.g. an `AdaptiveEmbedding` with `output_dim`
            = hidden_dim; it scales its outputs itself, and gives the
            `vocabulary_size`.
        stateful: Whether each call starts from the states the last one
            ended with (the batch size must be fixed). The layer warns,
            once, of a call that goes on from one whose length was not a
            multiple of segment_len (no `reset_state()` between): the
            stream then goes on as the calls each cut into segments, not
            as one call.
        return_state: Whether to return the states after the outputs.
        seed: Seed of the dropout.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps) token ids or (batch, steps, hidden_dim)
            (features beyond about 1e18 overflow in the attention: see
            `RelativeMultiHeadAttention`).
        mask: Optional boolean (batch, steps), false for padding.
        initial_state: Optional states to start from (the policy's), taken in
            the dtypes of `streaming_state_specs()`.
        training: Whether dropout is on.

    Returns:
        (batch, steps, hidden_dim); with `return_state`, [outputs, *states].

    Example:

    ```python
    backbone = keras_relrec.layers.SegmentRecurrence(
        num_layers=2, num_heads=2, head_size=8, hidden_dim=16, intermediate_dim=32,
        segment_len=4, memory=keras_relrec.layers.SegmentCache(num_slots=8, top_k=2),
        vocabulary_size=100)
    tokens = keras.Input((None,), dtype="int32")
    logits = keras.layers.Dense(100)(backbone(tokens))
    model = keras.Model(tokens, logits)
    ```
    """

    def __init__(
        self,
        num_layers,
        num_heads,
        head_size,
        hidden_dim,
        intermediate_dim,
        segment_len,
        memory,
        vocabulary_size=None,
        clamp_len=None,
        same_length=False,
        pre_lnorm=False,
        tie_relative_biases=False,
        dropout=0.0,
        attention_dropout=0.0,
        epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        relative_bias_initializer=None,
        embeddings_initializer="uniform",
        embedding=None,
        stateful=False,
        return_state=False,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_layers = validation.check_positive_int("num_layers", num_layers)
        self.hidden_dim = validation.check_positive_int("hidden_dim", hidden_dim)
        if self.hidden_dim % 2:
            raise ValueError(
                "Argument `hidden_dim` must be even (the position encoding has a sin and a cos "
                f"half); received hidden_dim={hidden_dim!r}."
            )
        self.segment_len = validation.check_positive_int("segment_len", segment_len)
        self.vocabulary_size = (
            None if vocabulary_size is None else validation.check_positive_int("vocabulary_size", vocabulary_size)
        )
        self.dropout = validation.check_rate("dropout", dropout)
        self.stateful = validation.check_bool("stateful", stateful)
        self.return_state = validation.check_bool("return_state", return_state)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.seed = validation.check_seed(seed)
        self.tie_relative_biases = validation.check_bool("tie_relative_biases", tie_relative_biases)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.relative_bias_initializer = keras.initializers.get(
            relative_bias_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.blocks = [
            TransformerXLBlock(
                num_heads,
                head_size,
                intermediate_dim,
                clamp_len=check_clamp_len(clamp_len),
                same_length=same_length,
                pre_lnorm=pre_lnorm,
                dropout=dropout,
                attention_dropout=attention_dropout,
                shared_relative_biases=self.tie_relative_biases,
                epsilon=epsilon,
                kernel_initializer=clone_initializer(self.kernel_initializer, f"block_{n}"),
                bias_initializer=clone_initializer(self.bias_initializer, f"block_{n}"),
                relative_bias_initializer=clone_initializer(self.relative_bias_initializer, f"block_{n}"),
                seed=seed,
                dtype=self.dtype_policy,
                name=f"block_{n}",
            )
            for n in range(self.num_layers)
        ]
        self.embedding = _as_embedding(embedding, self.vocabulary_size, self.hidden_dim, self.dtype_policy)
        if self.embedding is not None:
            self.vocabulary_size = self.embedding.vocabulary_size
        elif self.vocabulary_size is not None:
            self.embedding = keras.layers.Embedding(
                self.vocabulary_size, self.hidden_dim, embeddings_initializer=self.embeddings_initializer,
                dtype=self.dtype_policy, name="embedding",
            )
        self.embedding_dropout = keras.layers.Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        # Private, so that Keras saves the policy's weights after the
        # presets' own names for them (the paths of 0.2's files).
        self._memory = _as_policy(memory)
        if same_length and not self._memory.supports_same_length:
            raise ValueError(
                "Argument `same_length` needs a memory of positions (every query sees the mem_len nearest): a "
                f"FifoMemory with mem_len > 0; received same_length=True with {_describe(self._memory)}."
            )
        self._memory.configure(self.num_layers, self.segment_len, self.hidden_dim, self.dtype_policy,
                               self.kernel_initializer, self.bias_initializer)
        self.states = None
        # Whether the last stateful call cut a segment short, and whether
        # a call going on from such a cut was warned of.
        self._cut_short = False
        self._warned_cut = False
        self.supports_masking = True

    # Building and states.
    def build(self, input_shape):
        rank = 2 if self.vocabulary_size is not None else 3
        if len(input_shape) != rank or (rank == 3 and input_shape[-1] != self.hidden_dim):
            raise ValueError(self._wrong_input(tuple(input_shape)))
        self.input_spec = keras.layers.InputSpec(ndim=rank, axes={} if rank == 2 else {-1: self.hidden_dim})
        if self.embedding is not None and not self.embedding.built:
            self.embedding.build(input_shape)
        self._build_segment()
        if self.stateful:
            batch = input_shape[0]
            if batch is None:
                raise ValueError(
                    f"{type(self).__name__}(stateful=True) needs to know its batch size: give the "
                    f"Input a `batch_size`; received input of shape {tuple(input_shape)}."
                )
            state_variables.create(self, batch)

    def _wrong_input(self, shape):
        """What is wrong with inputs of `shape`, and which argument to change."""
        name, features = type(self).__name__, f"(batch, steps, {self.hidden_dim})"
        if self.vocabulary_size is not None:
            return (
                f"{name} expects inputs (batch, steps) token ids; received input of shape {shape} with "
                f"vocabulary_size={self.vocabulary_size}. Give token ids, or leave vocabulary_size out to take "
                f"{features} features."
            )
        fix = {
            2: f" with vocabulary_size=None. Pass vocabulary_size=... to embed token ids, or give {features} features.",
            3: f". Give {self.hidden_dim} features a step (hidden_dim), e.g. through "
               f"keras.layers.Dense({self.hidden_dim}).",
        }.get(len(shape), ".")
        return f"{name} expects inputs {features}; received input of shape {shape}{fix}"

    def _build_segment(self):
        """Builds what runs on a segment (batch, segment_len, hidden_dim)."""
        for block in self.blocks:
            block.build((None, self.segment_len, self.hidden_dim))
        if self.tie_relative_biases:
            shape = (self.blocks[0].attention.num_heads, self.blocks[0].attention.head_size)
            self.content_bias, self.position_bias = (
                self.add_weight(name=name, shape=shape,
                                initializer=clone_initializer(self.relative_bias_initializer, name))
                for name in ("content_bias", "position_bias")
            )
        self._memory.build_parts((None, self.segment_len, self.hidden_dim))

    def streaming_state_specs(self):
        """[(name, shape without batch, dtype)] of the states: the memory
        policy's (see `StreamingLayer`)."""
        return self._memory.state_specs()

    def _relative_biases(self):
        return (self.content_bias, self.position_bias) if self.tie_relative_biases else None

    @property
    def streaming_chunk_length(self):
        """The streaming step takes one segment."""
        return self.segment_len

    def get_initial_state(self, batch_size):
        """The states at the start of a stream: zeros (empty memories)."""
        return state_variables.zeros(self, batch_size)

    def streaming_initial_state(self, batch_size):
        return self.get_initial_state(batch_size)

    def reset_state(self):
        state_variables.reset(self)
        self._cut_short = False

    # Decoding with fixed weights.
    def key_value_cache(self, states):
        """The states of a `FifoMemory` (every layer's memory, then the
        memory mask) as a decoding cache (see `call_with_cache`): each
        layer's memory projected once into its keys and values, each (batch,
        heads, mem_len, head_size), a ring of slots; then each layer's
        position table (heads, mem_len + segment_len, head_size), which stays
        the same; then the memory mask (batch, mem_len) and the cursor, the
        slot of the oldest position, which the next one overwrites (an int32
        scalar): `[keys_0, values_0, …, keys_(n−1), values_(n−1), table_0, …,
        table_(n−1), memory_mask, cursor]`."""
        self._check_decoding("key_value_cache")
        states = list(states)
        self._check_states(states, "states")
        *memories, memory_mask = states
        cache = []
        for block, memory in zip(self.blocks, memories):
            cache.extend(block.attention.project_memory(memory, memory_mask))
        table = self._memory.mem_len + self.segment_len
        cache += [block.attention.position_table(table) for block in self.blocks]
        # The memory's oldest position is in its first slot.
        return cache + [memory_mask, ops.zeros((), "int32")]

    def call_with_cache(self, inputs, cache):
        """`streaming_step` for decoding (inference, fixed weights): a
        segment of 1 to `segment_len` positions, all valid, (batch, L) token
        ids or (batch, L, hidden_dim), attends to `cache` (from
        `key_value_cache`) instead of the memories, so that each layer
        projects only the segment's positions (O(L · d²) instead of
        O((mem_len + L) · d²)) and writes their keys and values over the
        oldest slots. Returns (outputs (batch, L, hidden_dim), the next
        cache), the outputs equal to `streaming_step`'s from the states the
        cache stands for."""
        self._check_decoding("call_with_cache")
        length = inputs.shape[1]
        if length is None or not 0 < length <= self.segment_len:
            raise ValueError(
                f"{type(self).__name__}.call_with_cache takes a segment of 1 to segment_len={self.segment_len} "
                f"positions of a known length; received inputs of shape {tuple(inputs.shape)}. Run longer "
                "inputs with streaming_step."
            )
        layers, memory = self.num_layers, self._memory.mem_len
        if len(cache) != 3 * layers + 2:
            raise ValueError(
                f"{type(self).__name__}.call_with_cache expects the {3 * layers + 2} tensors of "
                f"key_value_cache; received {len(cache)}."
            )
        tables, (slot_valid, cursor) = cache[2 * layers : 3 * layers], cache[3 * layers :]
        if len(inputs.shape) != (2 if self.vocabulary_size is not None else 3):
            raise ValueError(self._wrong_input(tuple(inputs.shape)))
        validation.check_states_batch(self, inputs, [slot_valid])
        slots = slot_valid.shape[1]
        # Query i sees the positions at distance 0 … mem_len + i from it
        # (below mem_len with same_length): of the slots (the latest, before
        # the cursor, at 1 + i) those that hold one, and the new ones up to
        # itself.
        queries = ops.arange(length, dtype="int32")
        age = ops.mod(cursor - 1 - ops.arange(slots, dtype="int32"), slots)
        distances = ops.concatenate([age[None] + 1 + queries[:, None], queries[:, None] - queries[None]], axis=1)
        visible = ops.logical_and(distances >= 0, distances <= memory + queries[:, None])
        if self.blocks[0].attention.same_length:
            visible = ops.logical_and(visible, distances < memory)
        key_valid = ops.concatenate([ops.cast(slot_valid, "bool"), ops.ones(ops.shape(inputs)[:2], "bool")], axis=1)
        visible = ops.logical_and(visible[None, None], key_valid[:, None, None, :])
        slot_valid = write_slots(slot_valid, ops.ones(ops.shape(inputs)[:2], slot_valid.dtype), cursor, axis=1)
        hidden = self._embed(inputs, False)
        new_cache = []
        for n, block in enumerate(self.blocks):
            hidden, keys, values = block.decode(hidden, cache[2 * n], cache[2 * n + 1], cursor, distances, visible,
                                                tables[n], self._relative_biases())
            new_cache += [keys, values]
        return hidden, new_cache + list(tables) + [slot_valid, ops.mod(cursor + length, slots)]

    def _check_decoding(self, method):
        if not isinstance(self._memory, FifoMemory) or not self._memory.mem_len:
            raise ValueError(
                f"{type(self).__name__}.{method} needs a memory of projected positions, a FifoMemory with "
                f"mem_len > 0; this layer has {_describe(self._memory)}. Decode with streaming_step."
            )

    # The segment loop.
    def call(self, inputs, mask=None, initial_state=None, training=None):
        if self.stateful:
            self._warn_after_cut(inputs.shape[1])
        states = self._initial_state(inputs, initial_state)
        outputs, new_states = self._run(inputs, mask, states, training)
        if self.stateful:
            for variable, value in zip(self.states, new_states):
                variable.assign(ops.cast(value, variable.dtype))
        return [outputs, *new_states] if self.return_state else outputs

    def streaming_step(self, inputs, states, mask=None):
        return self._run(inputs, mask, self._as_specified(list(states), "states"), False)

    def _warn_after_cut(self, steps):
        """Warns, once, of a stateful call that goes on from a call whose
        length was not a multiple of segment_len (with no reset_state()
        between): the stream then runs as the calls each cut into
        segments, not as one call over the whole stream. A stream's last
        call may be short: only what follows it is warned of."""
        if self._cut_short and not self._warned_cut:
            self._warned_cut = True
            warnings.warn(
                f"{type(self).__name__}(stateful=True) goes on from a call whose length was not a multiple of "
                f"segment_len={self.segment_len}: that call's last segment was cut short, so this call does not "
                "go on as one call over the whole stream would (see the layer's docstring). Feed calls of a "
                "multiple of segment_len, all but a stream's last, and call reset_state() before the next stream.",
                stacklevel=2,
            )
        self._cut_short = steps is not None and steps % self.segment_len != 0

    def _run(self, inputs, mask, states, training):
        validation.check_mask(self, mask, inputs)
        hidden = self._embed(inputs, training)
        steps = axis_size(hidden, 1)
        if mask is not None:
            mask = ops.cast(mask, "bool")
            hidden = zero_masked(hidden, mask)
        return self._run_segments(hidden, mask, states, steps, training)

    def _initial_state(self, inputs, initial_state):
        if initial_state is not None:
            initial_state = self._as_specified(list(initial_state), "initial states")
            validation.check_states_batch(self, inputs, initial_state)
            return initial_state
        if self.stateful:
            return state_variables.read(self, inputs)
        batch = axis_size(inputs, 0)
        return self.get_initial_state(batch)

    def _as_specified(self, states, what):
        """`states` (`what` they are, for an error) in the dtypes they keep
        from segment to segment, after `_check_states`."""
        self._check_states(states, what)
        return [ops.cast(state, dtype) for (_, _, dtype), state in zip(self.streaming_state_specs(), states)]

    def _check_states(self, states, what):
        """The policy's states: their count and shapes."""
        specs = self.streaming_state_specs()
        if len(states) != len(specs):
            raise ValueError(
                f"{type(self).__name__} expects {len(specs)} {what} "
                f"({', '.join(name for name, _, _ in specs)}); received {len(states)}."
            )
        for (name, shape, _), state in zip(specs, states):
            if tuple(state.shape[1:]) != shape:
                raise ValueError(
                    f"{type(self).__name__} expects {what[:-1]} '{name}' of shape (batch, "
                    f"{', '.join(map(str, shape))}); received shape {tuple(state.shape)}."
                )

    def _embed(self, inputs, training):
        if self.embedding is None:
            hidden = ops.cast(inputs, self.compute_dtype)
        elif not isinstance(self.embedding, keras.layers.Embedding):
            hidden = self.embedding(inputs)  # it checks the ids and scales
        else:
            validation.check_token_ids(self, inputs, self.vocabulary_size)
            ids = ops.cast(inputs, "int32")
            # A quantized table (Keras' `quantize`) is read by its own lookup.
            if micro_forms.enabled() and not self.embedding.quantization_mode:
                # A one-hot product: Keras' lookup corrects negative ids
                # with an int32 SELECT, which TFLite Micro has not.
                hidden = lookup_rows(ops.cast(self.embedding.embeddings, self.compute_dtype), ids)
            else:
                hidden = self.embedding(ids)
            # sqrt(d) as a Python number: it takes the embedding's dtype.
            hidden = hidden * math.sqrt(self.hidden_dim)
        return self.embedding_dropout(hidden, training=training)

    def _stack(self, mask, training):
        """The blocks run on a segment without memory."""
        def run(hidden):
            for block in self.blocks:
                hidden = block(hidden, mask=mask, relative_biases=self._relative_biases(), training=training)
            return hidden
        return run

    def _segment(self, hidden, mask, states, steps, training):
        """One segment (batch, segment_len or fewer, hidden_dim) of which
        the first `steps` positions (an int, or a scalar tensor) belong to
        the sequence and the rest pads it: (outputs, states)."""
        arguments = self._memory.read(hidden, mask, states, self._stack(mask, training), training)
        if len(arguments) != self.num_layers:
            raise ValueError(
                f"The memory policy {type(self._memory).__name__}.read must return one dict of call arguments "
                f"per block ({self.num_layers}; an empty dict: no memory); it returned {len(arguments)}."
            )
        layer_inputs = []
        for block, memory in zip(self.blocks, arguments):
            layer_inputs.append(hidden)
            result = block(hidden, mask=mask, relative_biases=self._relative_biases(), training=training, **memory)
            # With a memory, a block returns its next memory too.
            hidden = result if memory.get("memory") is None else result[0]
        return hidden, self._checked_update(self._memory.update(states, layer_inputs, hidden, mask, steps), hidden)

    def _checked_update(self, new_states, hidden):
        """The states a policy's `update` returned, refused unless they are
        its `state_specs()` (for the batch of `hidden`): the next segment's
        read and a loop's carry take them as they are."""
        specs = [(name, (hidden.shape[0], *shape), dtype) for name, shape, dtype in self._memory.state_specs()]
        return validation.check_returned_states(f"The memory policy {type(self._memory).__name__}.update",
                                                new_states, specs, "state_specs()")

    def _masked_segment(self, hidden, mask, states, steps, training):
        outputs, new_states = self._segment(hidden, mask, states, steps, training)
        if mask is not None and new_states:
            # A segment with no valid position leaves the states as they
            # were, as a masked step leaves an RNN's state.
            keep = any_valid(mask, axis=1)
            new_states = [
                ops.where(ops.reshape(keep, (-1,) + (1,) * (len(new.shape) - 1)), new, ops.cast(old, new.dtype))
                for new, old in zip(new_states, states)
            ]
        return outputs, new_states

    def _run_segments(self, hidden, mask, states, steps, training):
        """Every segment of (batch, steps, d) in turn, the last one padded
        (unless the policy runs short segments and it is the only one):
        (outputs, states)."""
        length = self.segment_len
        if isinstance(steps, int) and (steps in (0, length) or (steps < length and self._memory.runs_short_segments)):
            # None, or one segment as it is.
            return (hidden, states) if steps == 0 else self._masked_segment(hidden, mask, states, steps, training)
        count = -(-steps // length)
        padding = count * length - steps
        if mask is not None or not isinstance(padding, int) or padding:
            mask = ops.ones(ops.shape(hidden)[:2], "bool") if mask is None else mask
            mask = ops.pad(mask, [[0, 0], [0, padding]], constant_values=False)
        hidden = ops.pad(hidden, [[0, 0], [0, padding], [0, 0]])
        if loops.unrolls(count, training):
            # In training, the segments of a step share one trace where the
            # backend can (TensorFlow's graph).
            segment = self._masked_segment if count == 1 else loops.traced_once(self, self._masked_segment)
            outputs = []
            for start in range(0, count * length, length):
                segment_mask = None if mask is None else mask[:, start : start + length]
                output, states = segment(hidden[:, start : start + length], segment_mask, states,
                                         min(steps - start, length), training)
                outputs.append(output)
            return ops.concatenate(outputs, axis=1)[:, :steps], states

        # A loop, whose body XLA and JAX compile once whatever the count.
        # -1 in a slice's size: the whole batch, whatever it is. An export
        # writes each segment's outputs in place (builtins in TFLite);
        # otherwise a select over the segments writes them, which TensorFlow
        # differentiates (its in-place update has no gradient).
        in_place = loops.unrolling()
        batch = ops.shape(hidden)[0]

        def body(index, carry):
            start = index * length
            segment = ops.slice(hidden, (0, start, 0), (-1, length, self.hidden_dim))
            segment_mask = None if mask is None else ops.slice(mask, (0, start), (-1, length))
            output, new_states = self._masked_segment(segment, segment_mask, list(carry[:-1]),
                                                      ops.minimum(steps - start, length), training)
            if in_place:
                return (*new_states, ops.slice_update(carry[-1], (0, start, 0), output))
            this_one = ops.reshape(ops.arange(count, dtype="int32") == index, (1, -1, 1, 1))
            return (*new_states, ops.where(this_one, output[:, None], carry[-1]))

        written = (ops.zeros_like(hidden) if in_place
                   else ops.zeros((batch, count, length, self.hidden_dim), hidden.dtype))
        *states, outputs = loops.counted_loop(count, body, (*states, written))
        return ops.reshape(outputs, (batch, -1, self.hidden_dim))[:, :steps], states

    def compute_mask(self, inputs, mask=None):
        if not self.return_state:
            return mask
        return [mask] + [None] * len(self.streaming_state_specs())

    def compute_output_shape(self, input_shape):
        outputs = (input_shape[0], input_shape[1], self.hidden_dim)
        if not self.return_state:
            return outputs
        return [outputs] + [(input_shape[0],) + shape for _, shape, _ in self.streaming_state_specs()]

    def get_config(self):
        block = self.blocks[0].get_config()
        config = {
            "num_layers": self.num_layers,
            "num_heads": block["num_heads"],
            "head_size": block["head_size"],
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": block["intermediate_dim"],
            "segment_len": self.segment_len,
            "vocabulary_size": self.vocabulary_size,
            "clamp_len": block["clamp_len"],
            "same_length": block["same_length"],
            "pre_lnorm": block["pre_lnorm"],
            "tie_relative_biases": self.tie_relative_biases,
            "dropout": self.dropout,
            "attention_dropout": block["attention_dropout"],
            "epsilon": block["epsilon"],
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "relative_bias_initializer": keras.initializers.serialize(self.relative_bias_initializer),
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "embedding": None if isinstance(self.embedding, (keras.layers.Embedding, type(None)))
            else keras.saving.serialize_keras_object(self.embedding),
            "stateful": self.stateful,
            "return_state": self.return_state,
            "seed": self.seed,
            "memory": keras.saving.serialize_keras_object(self._memory),
        }
        return {**super().get_config(), **config}


def _as_embedding(embedding, vocabulary_size, hidden_dim, dtype_policy):
    """The token embedding given (a layer or its config), checked; None
    where none is given."""
    if embedding is None:
        return None
    if isinstance(embedding, dict):
        embedding = keras.saving.deserialize_keras_object(embedding)
    width, size = getattr(embedding, "output_dim", None), getattr(embedding, "vocabulary_size", None)
    if not isinstance(embedding, keras.layers.Layer) or width != hidden_dim or size is None or (
            vocabulary_size not in (None, size)):
        raise ValueError(
            "Argument `embedding` must be a token embedding layer with `vocabulary_size` and `output_dim` = "
            f"hidden_dim = {hidden_dim} (e.g. keras_relrec.layers.AdaptiveEmbedding), and vocabulary_size "
            f"left out or equal to its; received embedding={embedding!r} (output_dim={width!r}, "
            f"vocabulary_size={size!r}) with vocabulary_size={vocabulary_size!r}."
        )
    if embedding.dtype_policy.name != dtype_policy.name:
        # A float32 embedding would round a float64 model's inputs.
        raise ValueError(
            f"Argument `embedding` computes in the dtype policy '{embedding.dtype_policy.name}', the layer in "
            f"'{dtype_policy.name}'; give the embedding the layer's (dtype=...), or create both under one "
            "keras.config.set_dtype_policy(...)."
        )
    return embedding


def _as_policy(memory):
    """The policy to run: `memory`, or the one its config describes."""
    if isinstance(memory, dict):
        memory = keras.saving.deserialize_keras_object(memory)
    if not isinstance(memory, MemoryPolicy):
        raise ValueError(
            "Argument `memory` must be a memory policy (keras_relrec.layers.FifoMemory, "
            f"keras_relrec.layers.SegmentCache) or its config; received {memory!r}."
        )
    return memory


def _describe(policy):
    """`FifoMemory(mem_len=0)`: a policy by its arguments, for messages."""
    config = policy.get_config()
    arguments = ", ".join(f"{key}={value!r}" for key, value in config.items()
                          if key not in ("name", "trainable", "dtype"))
    return f"{type(policy).__name__}({arguments})"
