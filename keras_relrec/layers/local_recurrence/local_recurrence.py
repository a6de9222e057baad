"""A recurrent cell run over a sliding window of M steps at every position:
R-Transformer's local recurrence, without its cap on the length."""

import keras
from keras import ops
from keras import tree

from keras_relrec.layers.streaming_layer import StreamingLayer
from keras_relrec.ops import axis_size
from keras_relrec.ops import gather_steps
from keras_relrec.ops import valid_steps_back
from keras_relrec.ops import valid_steps_first
from keras_relrec.utils import keras_internals
from keras_relrec.utils import state_variables
from keras_relrec.utils import validation
from keras_relrec.utils.registration import register_layer


@register_layer
class LocalRecurrence(keras.layers.Layer, StreamingLayer):
    """Runs a recurrent cell over the M most recent steps at every position.

    The local RNN of R-Transformer (Wang et al., "R-Transformer: Recurrent
    Neural Network Enhanced Transformer", 2019), which the Deep Recurrent
    Relation Transformer (Belanger Nzakimuena, 2022) puts in front of every
    relation module. For inputs x_1 … x_T and a cell f with zero
    initial state s_0:

    ```
    window_t = (x_{t−M+1}, …, x_t),  x_s = 0 for s < 1   (M − 1 zeros on the left)
    s_k = f(window_t[k], s_{k−1}),   k = 1 … M,   s_0 = 0
    y_t = output of f at k = M                          (batch, T, units)
    ```

    Every window starts from the zero state, so y_t depends on x_{t−M+1..t}
    alone: causal, and position-aware without a position encoding. The left
    zeros run through the cell as steps (they are not skipped), as in the
    reference code.

    The DRRT's equations (1)–(2), h_t = σ_h(U A_t + V h_{t−1} + b) and
    A'_t = σ(W h_t + b), are `LocalRecurrence(keras.layers.SimpleRNNCell(d,
    activation=σ_h), M)` followed by `keras.layers.Dense(d, activation=σ)`.

    **Masking.** A masked step is as if absent: it enters no window (the
    window at t holds the last M valid steps up to t, zeros on the left
    where there are fewer), and its own output is zeros, with the mask
    passed on. So a padded sequence — padded before, after or inside —
    gives at its valid steps what the sequence without padding gives.

    **Memory.** No (batch, T, M, features) copy of the windows is made: the
    cell's k-th step reads the sequence shifted by k. The M steps' input
    projections do not depend on each other, though, and XLA computes them
    together: the forward pass then holds about M·B·T·g numbers, g the
    width of the cell's input projection (3u for a GRU of u units, 4u for
    an LSTM), which is more than the window copy once g > features (622
    MiB at B = 1, T = 100,000, M = 16 for a GRU of 32 units;
    `benchmarks/RESULTS.md`), and training keeps every step's activations
    for the gradient, several times that. `chunk_size=C` bounds both. At
    inference the windows run C positions at a time in a loop, so the
    working set is that of B·C windows (31 MiB for the same case with
    C = 1,024, and faster); on TensorFlow a length known when the graph is
    traced unrolls the chunks instead (its in-place update has no
    gradient), which bounds nothing under XLA: give the model an unknown
    length (`keras.Input((None, features))`) to get the loop. In training
    (a length known when traced) the chunks run in a loop whose gradient
    recomputes each chunk's M steps (`keras.remat`) instead of keeping
    them: the forward pass keeps the inputs and outputs, the backward pass
    one chunk's activations at a time, for one more forward pass of the
    cell (the figures: `benchmarks/RESULTS.md`). Training runs at once where the
    length is unknown when traced, or where the cell has dropout (a
    recomputation would draw other masks). The results are the same.

    **Streaming.** The state is the last M − 1 (valid) inputs. As a
    `StreamingLayer`, the export steps it frame by frame, and
    `stateful=True` carries it from one call to the next; the M steps of a
    window are unrolled, so the export has no loop inside a step.

    Args:
        cell: A recurrent cell (with `state_size`, called as
            `cell(inputs, states)` → `(output, new_states)`): Keras'
            `LSTMCell`, `GRUCell`, `SimpleRNNCell`, a cell of this package,
            `keras.layers.StackedRNNCells`; or a `keras.layers.RNN`, of
            which the cell is taken (its other arguments do not apply); or
            a cell's serialized config. Its output size must be an integer.
        window_size: M, the number of steps in each window (≥ 1).
        chunk_size: Optional C: run the windows C positions at a time, to
            bound the memory of long sequences, at inference and in training
            (where the gradient recomputes each chunk; see Memory). Default:
            all at once.
        stateful: Whether the last M − 1 inputs of a call start the next
            (the batch size must be known); `reset_state()` clears them.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, features).
        mask: Optional boolean (batch, steps), false for padding.
        training: Passed to the cell (dropout).

    Returns:
        (batch, steps, units): the cell's output at the end of each window.

    Example:

    ```python
    local = keras_relrec.layers.LocalRecurrence(keras.layers.GRUCell(32), window_size=7)
    y = local(np.random.rand(4, 100, 16))   # (4, 100, 32)
    ```
    """

    def __init__(self, cell, window_size, chunk_size=None, stateful=False, **kwargs):
        super().__init__(**kwargs)
        self.cell = _as_cell(cell)
        self.window_size = validation.check_positive_int("window_size", window_size)
        self.chunk_size = None if chunk_size is None else validation.check_positive_int("chunk_size", chunk_size)
        self.stateful = validation.check_bool("stateful", stateful)
        output_size = getattr(self.cell, "output_size", None)
        if output_size is None:
            state_size = self.cell.state_size
            output_size = state_size if isinstance(state_size, int) else tree.flatten(state_size)[0]
        if not isinstance(output_size, int):
            raise ValueError(
                "Argument `cell` must have an integer output size (or first state size); received "
                f"{type(self.cell).__name__} with output size {output_size!r}."
            )
        self.units = output_size
        self.states = None
        self.supports_masking = True

    def build(self, input_shape):
        self.input_spec = validation.sequence_input_spec(self, input_shape)
        self._frame_shape = (input_shape[-1],)
        if not self.cell.built:
            self.cell.build((None,) + self._frame_shape)
        if self.stateful:
            if input_shape[0] is None:
                raise ValueError(
                    "LocalRecurrence(stateful=True) needs to know its batch size: give the Input a "
                    f"`batch_size`; received input of shape {tuple(input_shape)}."
                )
            state_variables.create(self, input_shape[0])

    def reset_state(self):
        state_variables.reset(self)

    # The three methods of StreamingLayer.
    def streaming_state_specs(self):
        """The last M − 1 inputs, oldest first."""
        return [("inputs", (self.window_size - 1,) + self._frame_shape, self.compute_dtype)]

    def streaming_initial_state(self, batch_size):
        return state_variables.zeros(self, batch_size)

    def streaming_step(self, inputs, states, mask=None):
        outputs, last_inputs = self._run(inputs, mask, states[0], False)
        return outputs, [last_inputs]

    def call(self, inputs, mask=None, training=None):
        previous = state_variables.read(self, inputs)[0] if self.stateful else None
        outputs, last_inputs = self._run(inputs, mask, previous, training)
        if self.stateful:
            self.states[0].assign(ops.cast(last_inputs, self.states[0].dtype))
        return outputs

    def _run(self, inputs, mask, previous, training):
        """The outputs for `inputs` after the M − 1 inputs `previous` (None:
        zeros), and the last M − 1 valid inputs of the two together."""
        validation.check_mask(self, mask, inputs)
        inputs = ops.cast(inputs, self.compute_dtype)
        batch = ops.shape(inputs)[0]
        steps = axis_size(inputs, 1)
        if mask is not None:
            inputs, valid = valid_steps_first(inputs, mask)
        if previous is None:
            previous = ops.zeros((batch, self.window_size - 1) + self._frame_shape, self.compute_dtype)
        padded = ops.concatenate([ops.cast(previous, self.compute_dtype), inputs], axis=1)
        fits = isinstance(steps, int) and steps <= (self.chunk_size or steps)
        if self.chunk_size is None or fits:
            outputs = self._windows(padded, steps, training)
        elif not training:
            outputs = self._chunked_windows(padded, steps)
        elif isinstance(steps, int) and not _has_dropout(self.cell):
            outputs = self._rematerialised_windows(padded, steps)
        else:
            # Training with an unknown length (TensorFlow's XLA cannot take
            # the gradient of a loop of unknown length) or with the cell's
            # dropout (a recomputation would draw its masks again): at once.
            outputs = self._windows(padded, steps, training)
        if mask is None:
            last_inputs = padded[:, steps:]
        else:
            # Each row's last M − 1 valid inputs (its valid steps are first).
            outputs = valid_steps_back(outputs, mask)
            last_inputs = gather_steps(padded, valid[:, None] + ops.arange(self.window_size - 1, dtype="int32"))
        return outputs, last_inputs

    def _windows(self, padded, steps, training):
        """The cell over every window of M steps in `padded`, (batch,
        steps + M − 1, features) → (batch, steps, units), the M steps
        unrolled."""
        batch = ops.shape(padded)[0]
        rows = batch * steps
        states = self._initial_cell_state(rows)
        kwargs = {"training": training} if keras_internals.call_has_training_arg(self.cell) else {}
        if training:
            # One dropout mask for all windows, drawn before the steps, as
            # `keras.layers.RNN` draws it before its loop.
            keras_internals.draw_dropout_masks(self.cell, ops.reshape(padded[:, :steps], (-1,) + self._frame_shape),
                                               states)
        for k in range(self.window_size):
            # Step k of every window reads the sequence shifted by k.
            # -1, not the rows read at run time: an exported file then
            # reshapes to a constant shape (see export/tflite/static_reshapes).
            frame = ops.reshape(padded[:, k : k + steps], (-1,) + self._frame_shape)
            output, states = self.cell(frame, states, **kwargs)
            states = states if tree.is_nested(states) else [states]
        keras_internals.reset_dropout_masks(self.cell)
        return ops.reshape(ops.cast(output, self.compute_dtype), (batch, steps, self.units))

    def _chunked_windows(self, padded, steps):
        """`_windows` C positions at a time (at inference)."""
        chunk, window = self.chunk_size, self.window_size
        if isinstance(steps, int) and keras.backend.backend() != "jax":
            # A known number of chunks on TensorFlow: unrolled, since its
            # in-place update (below) has no gradient. (JAX's loop has one,
            # and unrolled chunks would let XLA run them all at once.)
            return ops.concatenate(
                [self._windows(padded[:, start : start + min(chunk, steps - start) + window - 1],
                               min(chunk, steps - start), False)
                 for start in range(0, steps, chunk)],
                axis=1,
            )
        # A loop that writes each chunk's outputs in place (builtins in
        # TFLite), after zeros that give the last chunk its C + M − 1 inputs.
        batch = ops.shape(padded)[0]
        count = (steps + chunk - 1) // chunk
        tail = ops.zeros((batch, count * chunk - steps) + self._frame_shape, padded.dtype)
        padded = ops.concatenate([padded, tail], axis=1)

        def body(i, outputs):
            piece = ops.slice(padded, [0, i * chunk, 0], [batch, chunk + window - 1, self._frame_shape[0]])
            return ops.slice_update(outputs, [0, i * chunk, 0], self._windows(piece, chunk, False))

        outputs = ops.zeros((batch, count * chunk, self.units), self.compute_dtype)
        return ops.fori_loop(0, count, body, outputs)[:, :steps]

    def _rematerialised_windows(self, padded, steps):
        """`_windows` C positions at a time in training, in a loop whose
        gradient recomputes each chunk's M steps (`keras.remat`) instead of
        keeping them: the forward pass keeps the chunks' inputs and outputs,
        the backward pass the activations of one chunk at a time."""
        chunk, window = self.chunk_size, self.window_size
        batch = ops.shape(padded)[0]
        count = (steps + chunk - 1) // chunk
        tail = ops.zeros((batch, count * chunk - steps) + self._frame_shape, padded.dtype)
        padded = ops.concatenate([padded, tail], axis=1)
        # (count, batch, C + M − 1, features): chunk i's inputs, overlapping
        # the next chunk's by M − 1 steps.
        starts = ops.arange(count, dtype="int32")[:, None] * chunk
        pieces = ops.take(padded, starts + ops.arange(chunk + window - 1, dtype="int32")[None, :], axis=1)
        pieces = ops.transpose(pieces, (1, 0, 2, 3))
        # The cell's weights enter as arguments, read through a stateless
        # scope: TensorFlow's recomputation in a loop cannot capture variables.
        weights = self.cell.weights

        def windows(piece, *values):
            with keras.StatelessScope(state_mapping=list(zip(weights, values))):
                return self._windows(piece, chunk, True)

        windows = keras.remat(windows)
        values = [weight.value for weight in weights]
        outputs = map_chunks(lambda i: windows(ops.take(pieces, i, axis=0), *values), count,
                             (batch, chunk, self.units), self.compute_dtype)  # (count, batch, C, units)
        outputs = ops.reshape(ops.transpose(outputs, (1, 0, 2, 3)), (batch, count * chunk, self.units))
        return outputs[:, :steps]

    def _initial_cell_state(self, rows):
        initial = getattr(self.cell, "get_initial_state", None)
        if initial is not None:
            states = initial(batch_size=rows)
            states = list(states) if tree.is_nested(states) else [states]
        else:
            sizes = self.cell.state_size if tree.is_nested(self.cell.state_size) else [self.cell.state_size]
            states = [ops.zeros((rows, size), self.compute_dtype) for size in sizes]
        return tree.map_structure(lambda s: ops.cast(s, self.cell.compute_dtype), states)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2]) + (self.units,)

    def get_config(self):
        config = {
            "cell": keras.saving.serialize_keras_object(self.cell),
            "window_size": self.window_size,
            "chunk_size": self.chunk_size,
            "stateful": self.stateful,
        }
        return {**super().get_config(), **config}


def map_chunks(function, count, shape, dtype):
    """`function(i)` of shape `shape` for i = 0 … count − 1, stacked:
    (count,) + shape, in a loop that a gradient runs back one chunk at a
    time. On JAX a scan; on TensorFlow a while loop with its maximum
    number of iterations (which XLA's gradient needs) that writes each
    chunk with `scatter_update` (which has a gradient)."""
    if keras.backend.backend() == "jax":
        return ops.scan(lambda carry, i: (carry, function(i)), ops.zeros(()), ops.arange(count, dtype="int32"))[1]

    def body(i, stacked):
        return i + 1, ops.scatter_update(stacked, ops.reshape(i, (1, 1)), ops.cast(function(i), dtype)[None])

    stacked = ops.zeros((count,) + tuple(shape), dtype)
    return ops.while_loop(lambda i, _: i < count, body, (ops.zeros((), "int32"), stacked),
                          maximum_iterations=count)[1]


def _has_dropout(cell):
    """Whether `cell` (or a cell it stacks) drops inputs or states."""
    if hasattr(cell, "cells"):
        return any(_has_dropout(c) for c in cell.cells)
    return bool(getattr(cell, "dropout", 0) or getattr(cell, "recurrent_dropout", 0))


def _as_cell(cell):
    """The cell to run: `cell`, the cell of a `keras.layers.RNN`, or the
    cell a serialized config describes."""
    if isinstance(cell, dict):
        cell = keras.saving.deserialize_keras_object(cell)
    if isinstance(cell, (list, tuple)):
        cell = keras.layers.StackedRNNCells(list(cell))
    if isinstance(cell, keras.layers.Bidirectional):
        raise ValueError(
            "Argument `cell` must run forward in time (a window ends at its own step); received "
            f"a Bidirectional layer '{cell.name}'."
        )
    if isinstance(cell, keras.layers.RNN):
        if cell.go_backwards:
            raise ValueError(
                f"Argument `cell` must run forward in time; received RNN '{cell.name}' with go_backwards=True."
            )
        cell = cell.cell
    if not isinstance(cell, keras.layers.Layer) or getattr(cell, "state_size", None) is None:
        raise ValueError(
            "Argument `cell` must be a recurrent cell (a layer with a `state_size`), a "
            f"keras.layers.RNN or a cell's config; received {cell!r}."
        )
    return cell
