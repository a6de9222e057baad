"""How a layer streams: frame by frame, with named states.

Streaming export (`export_tflite(..., streaming=True)`, the SavedModel
`step` endpoint) turns a model into one function,

    step(frame, states) -> (output, new states)

where `states` holds, by name, what every stateful layer of the model needs
to carry from one frame to the next. The export plan
(`keras_relrec/export/graph/export_plan.py`) asks each layer of the model's graph
one of three questions, and each answer is a name documented here, with its
default:

1. **Does it carry state?** Then it is a `StreamingLayer`: it implements
   the three methods of that class (`streaming_state_specs`,
   `streaming_initial_state`, `streaming_step`) and may override
   `streaming_refusal()` (default: it can stream) and
   `streaming_chunk_length` (default None: one frame per step).
   `keras.layers.RNN` streams through the export's adapter
   (`keras_relrec/export/graph/rnn_streamer.py`) and needs none of this.

2. **Does it act on each time step alone?** Then a one-step sequence
   through it gives that step's output, and it needs no state. Keras'
   per-step layers (`Dense`, `LayerNormalization`, `Masking`, ...) are
   known; any other layer says so with a boolean attribute (a property, if
   it depends on the configuration), False when absent:

       acts_per_step = True

   e.g. `BoFQuantizer` in memberships mode, `TwoDAttention(axis=2)`.

3. **Is it a cell inside `keras.layers.RNN`?** The RNN streams with its
   cell's states. A cell whose output is its first state, as Keras' cells'
   is, says so with `output_is_first_state = True` (all of keras_relrec's
   cells do; False when absent); then a masked frame repeats that state, as
   Keras' loops do, and no state is added. For any other cell behind a
   mask, the export carries the previous output as one more state.

Anything else (pooling over time, attention over the sequence, `Flatten`,
a plain operation across axis 1) makes the model unable to stream; the
export says which layer, why, and what to do instead. In sequence mode (`serve`) a layer runs
its own `call`, which must convert to TFLite builtins; `keras.layers.RNN`
and `Bidirectional` run in the export's builtins-only loop instead.

`acts_per_step` and `output_is_first_state` are attributes of layers that
do not stream with state (and of Keras' own and users' layers), so they
are read from any layer rather than inherited from `StreamingLayer`.
"""

import abc

REQUIRED_METHODS = ("streaming_state_specs", "streaming_initial_state", "streaming_step")


class StreamingLayer(abc.ABC):
    """Base of the layers that the export runs as a step with named states.

    A mixin beside `keras.layers.Layer` (list it after the Keras base, e.g.
    `class MyLayer(keras.layers.Layer, StreamingLayer)`), in the way of
    Sonnet's `RNNCore`: a subclass implements the three abstract methods
    with `keras.ops` (so that they run on every backend and trace into
    builtins-only TFLite) and may override the two optional members. Fed
    frame by frame (chunk by chunk) from the initial state, its
    `streaming_step` outputs must equal what its `call` gives on the whole
    sequence. The export refuses, naming the method and the state, a
    `streaming_step` or `streaming_initial_state` whose states are not
    those of `streaming_state_specs()`: as many, each of its shape and
    dtype.

    A class that implements the three methods without subclassing counts as
    a `StreamingLayer` too (`isinstance` checks the methods, as
    `collections.abc` does), so a user's layer streams as it did before this
    base existed; the export then reads the optional members with the
    defaults below.

    The export names each state "<layer name>_<state name>" (prefixed with
    the enclosing model's name inside a nested model).

    Attributes:
        streaming_chunk_length: None when the step takes one frame; L when
            the layer steps by chunks of L frames (e.g. a Transformer-XL
            segment): the exported step then takes and returns L frames.

    Example:

    ```python
    class CausalConvolution(keras.layers.Layer, StreamingLayer):
        # ... __init__, build, call: y_t = sum_k x_(t-k) W_k, k < K.

        def streaming_state_specs(self):
            return [("window", (self.kernel_size - 1, self.channels), self.compute_dtype)]

        def streaming_initial_state(self, batch_size):
            return state_variables.zeros(self, batch_size)

        def streaming_step(self, inputs, states, mask=None):
            window = ops.concatenate([states[0], inputs], axis=1)
            outputs = ops.conv(window, self.kernel, padding="valid")
            return outputs, [window[:, 1 - self.kernel_size :]]
    ```
    """

    streaming_chunk_length = None

    @classmethod
    def __subclasshook__(cls, subclass):
        if cls is not StreamingLayer:
            return NotImplemented
        has_all = all(callable(getattr(subclass, name, None)) for name in REQUIRED_METHODS)
        return True if has_all else NotImplemented

    @abc.abstractmethod
    def streaming_state_specs(self):
        """The layer's states, once it is built.

        Returns:
            A list of (name, shape, dtype): a name unique within the layer
            (e.g. "memory_0"), the shape without the batch axis, the dtype.
        """

    @abc.abstractmethod
    def streaming_initial_state(self, batch_size):
        """The states at the start of a stream.

        Args:
            batch_size: The number of streams, an int or a scalar tensor.

        Returns:
            A list of tensors (batch_size, *shape), in the order of
            `streaming_state_specs()`.
        """

    @abc.abstractmethod
    def streaming_step(self, inputs, states, mask=None):
        """Advances the layer by a chunk of the sequence.

        Args:
            inputs: (batch, steps, ...), the chunk; the export passes one
                step, or `streaming_chunk_length` steps.
            states: A list in the order of `streaming_state_specs()`.
            mask: None, or a boolean (batch, steps) mask: a masked step
                leaves the states as they were and gives the output a
                masked step gives in the layer's `call`.

        Returns:
            (outputs for the chunk, time axis included; the new states, a
            list in the order of the specs).
        """

    def streaming_refusal(self):
        """Why the layer cannot stream in its current configuration.

        Returns:
            A sentence naming the layer, or None (the default): it can.
        """
        return None
