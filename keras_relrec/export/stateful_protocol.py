"""The protocol a layer implements to be exported as a step with named states.

Streaming export (`export_tflite(..., streaming=True)`, the SavedModel
`step` endpoint) turns a model into one function,

    step(frame, states) -> (output, new states)

where `states` holds, by name, what every stateful layer of the model needs to
carry from one frame to the next. The export plan (`export_plan.py`) looks
at each layer of the model's graph and asks one of three questions:

1. **Does it act on each time step alone?** Then a one-step sequence
   through it gives that step's output, and it needs no state. Keras' per-
   step layers (`Dense`, `LayerNormalization`, `Masking`, ...) are known; any
   other layer says so with a boolean attribute (a property, if it depends
   on the configuration):

       acts_per_step = True

   e.g. `BoFQuantizer` in memberships mode, `TwoDAttention(axis=2)`.

2. **Does it carry state?** Then it implements the three methods below,
   written with `keras.ops` (so they run on every backend and trace into
   builtins-only TFLite). `keras.layers.RNN` is the first implementation,
   through the adapter `rnn_streamer.RNNStreamer`; a layer of this package or
   of a user implements them on itself:

       streaming_state_specs() -> [(name, shape, dtype), ...]
           The layer's states after it is built: a name (unique within the
           layer, e.g. "memory_0"), the shape without the batch axis, and
           the dtype. The export names each state "<layer name>_<name>"
           (prefixed with the enclosing model's name inside a nested model).

       streaming_initial_state(batch_size) -> [tensor, ...]
           The states at the start of a stream, in the order of the specs,
           each (batch_size, *shape).

       streaming_step(inputs, states, mask=None) -> (outputs, new_states)
           Advances the layer by `inputs`, a chunk of the sequence
           (batch, steps, ...) — the export passes one step — from `states`
           (a list in the order of the specs). `mask` is None or a boolean
           (batch, steps) mask: a masked step must leave the states as they
           were and give the output a masked step gives in the layer's own
           call. Returns the layer's outputs for the chunk, time axis
           included, and the new states in the order of the specs. Fed frame
           by frame from the initial state, the outputs must equal what the
           layer's `call` gives on the whole sequence.

   A layer may also define `streaming_refusal() -> str | None`, a reason not
   to stream in its current configuration (None: it can).

   A cell inside `keras.layers.RNN` needs nothing of this: the RNN streams
   with its cell's states. If the cell's output is its first state, as for
   Keras' cells, it says so with `output_is_first_state = True` (all of
   keras_relrec's cells do); then a masked frame repeats that state, as
   Keras' loops do, and no state is added. For any other cell behind a
   mask, the export carries the previous output as one more state.

   In sequence mode (`serve`) the layer runs its own `call`, which must
   convert to TFLite builtins; `keras.layers.RNN` and `Bidirectional` run
   in the export's builtins-only loop instead (`recurrent_loop.py`).

3. **Anything else** (pooling over time, attention over the sequence,
   `Flatten`, a plain operation across axis 1) makes the model unable to
   stream; the export says which layer and why.

`tests/export/test_stateful_protocol.py` defines a layer that is not an RNN
— a causal convolution whose state is the last `kernel_size − 1` frames —
and exports it through this protocol.
"""

from typing import Protocol
from typing import runtime_checkable


@runtime_checkable
class StatefulLayer(Protocol):
    """A layer that the export can run as a step with named states; see the
    module's docstring for what each method must do."""

    def streaming_state_specs(self):
        """[(name, shape without batch, dtype), ...] of the layer's states."""

    def streaming_initial_state(self, batch_size):
        """The states at the start of a stream, in the order of the specs."""

    def streaming_step(self, inputs, states, mask=None):
        """(outputs for the chunk `inputs`, new states)."""


def acts_per_step(layer):
    """Whether `layer` declares that it acts on each time step alone."""
    return bool(getattr(layer, "acts_per_step", False))


def streaming_refusal(layer):
    """The layer's own reason not to stream, or None."""
    refusal = getattr(layer, "streaming_refusal", None)
    return refusal() if callable(refusal) else None
