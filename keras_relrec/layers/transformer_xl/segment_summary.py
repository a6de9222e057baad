"""One key vector for a segment of positions: the segment cache's summary."""

import keras
from keras import ops

from keras_relrec.ops import masked_mean
from keras_relrec.ops import micro_forms
from keras_relrec.ops import zero_masked
from keras_relrec.utils import initializers
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer

KINDS = ("dense", "mlp", "bilstm")


@register_layer
class SegmentSummary(keras.layers.Layer):
    """Summarises a segment of L positions into one vector, the key by which
    the segment cache files and recalls segments.

    The design note "Cache-based Recurrent Transformer Network" (no paper,
    no public implementation) names three summaries; each is a `kind` here.
    For a segment h (L positions, the valid ones V) and width `units`:

    ```
    dense:  s = mean_{i ∈ V} ReLU(W_S h_i + b_S)
    mlp:    s = mean_{i ∈ V} g_n(… g_1(h_i)),  g_l(x) = ReLU(W_l x + b_l),  n = num_layers
    bilstm: s = [→h_last ; ←h_first]   (a bidirectional LSTM of units / 2 per
                                        direction over V, its two final states)
    ```

    The note gives the per-position maps; pooling after the non-linearity
    (a mean over the valid positions) makes one key per segment whatever
    its padding. The BiLSTM reads the order of the positions, the others do
    not. A segment with no valid position gives zeros.

    Args:
        units: The key width (even for `"bilstm"`).
        kind: `"dense"` (default), `"mlp"` or `"bilstm"`.
        num_layers: Layers of the `"mlp"` (default 2).
        kernel_initializer, bias_initializer: Of the dense layers and the
            BiLSTM's input kernels and biases (Keras' LSTM adds 1 to the
            forget gate's bias).
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, L, features).
        mask: Optional boolean (batch, L), false for padding.

    Returns:
        (batch, units).

    Example:

    ```python
    summary = keras_relrec.layers.SegmentSummary(8, kind="mlp")
    keys = summary(np.random.rand(4, 5, 16))   # (4, 8)
    ```
    """

    def __init__(self, units, kind="dense", num_layers=2, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.units = validation.check_positive_int("units", units)
        self.kind = validation.check_choice("kind", kind, KINDS)
        self.num_layers = validation.check_positive_int("num_layers", num_layers)
        if self.kind == "bilstm" and self.units % 2:
            raise ValueError(
                "Argument `units` must be even for kind='bilstm' (half per direction); "
                f"received units={units!r}."
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        if self.kind == "bilstm":
            # Unrolled over the segment's static length: no loop to export.
            lstm = {
                direction: keras.layers.LSTM(
                    self.units // 2, unroll=True, go_backwards=direction == "backward",
                    kernel_initializer=clone_initializer(self.kernel_initializer, direction),
                    bias_initializer=clone_initializer(self.bias_initializer, direction),
                    dtype=self.dtype_policy, name=f"{direction}_lstm",
                )
                for direction in ("forward", "backward")
            }
            self.maps = [keras.layers.Bidirectional(lstm["forward"], backward_layer=lstm["backward"],
                                                    dtype=self.dtype_policy, name="bilstm")]
        else:
            depth = self.num_layers if self.kind == "mlp" else 1
            self.maps = [
                initializers.dense(self.units, f"dense_{n}", self.kernel_initializer, self.bias_initializer,
                                   self.dtype_policy)
                for n in range(depth)
            ]
        self.supports_masking = True

    def build(self, input_shape):
        input_spec = validation.sequence_input_spec(self, input_shape)
        if self.kind == "bilstm" and input_shape[1] is None:
            raise ValueError(
                "SegmentSummary(kind='bilstm') unrolls over the segment and needs its length; "
                f"received input of shape {tuple(input_shape)}."
            )
        self.input_spec = input_spec
        shape = tuple(input_shape)
        for layer in self.maps:
            layer.build(shape)
            shape = shape[:-1] + (self.units,)

    def call(self, inputs, mask=None):
        validation.check_mask(self, mask, inputs)
        if mask is not None:
            mask = ops.cast(mask, "bool")
        # Padding is read as zeros, whatever it holds.
        hidden = zero_masked(ops.cast(inputs, self.compute_dtype), mask)
        if self.kind == "bilstm":
            if hidden.shape[0] == 0:  # Keras' LSTM cell fails on an empty batch
                return ops.zeros((0, self.units), self.compute_dtype)
            # Masked steps keep the states, so an all-masked row ends at the
            # initial zeros.
            if mask is not None and micro_forms.enabled():
                return self._bilstm_steps(hidden, mask)
            return self.maps[0](hidden, mask=mask)
        for layer in self.maps:
            hidden = ops.relu(layer(hidden))
        return masked_mean(hidden, mask)

    def _bilstm_steps(self, hidden, mask):
        """The BiLSTM's summary step by step from its cells: Keras' loop
        transposes the mask, a boolean TRANSPOSE that TensorFlow Lite for
        Microcontrollers does not run. Masked steps keep the states."""
        bidirectional, length = self.maps[0], hidden.shape[1]
        last = []
        for layer, order in ((bidirectional.forward_layer, range(length)),
                             (bidirectional.backward_layer, range(length - 1, -1, -1))):
            states = [ops.zeros((ops.shape(hidden)[0], layer.cell.units), hidden.dtype)] * 2
            for t in order:
                _, new = layer.cell(hidden[:, t], states)
                states = [ops.where(mask[:, t, None], n, s) for n, s in zip(new, states)]
            last.append(states[0])
        return ops.concatenate(last, axis=-1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.units)

    def get_config(self):
        config = {
            "units": self.units,
            "kind": self.kind,
            "num_layers": self.num_layers,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
