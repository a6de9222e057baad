"""Local features of a sequence for bag-of-features models: sub-sequence
windows, a learned causal convolution or fixed dilated kernels."""

import itertools
import math

import keras
import numpy as np
from keras import ops

from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer

MODES = ("conv", "window", "kernels")
# MiniRocket's kernels: nine taps, each −1 but three that are 2 (all 84
# choices of the three), so that every kernel sums to zero.
TAPS = 9
KERNELS = math.comb(TAPS, 3)


def kernel_dilations(window_size):
    """MiniRocket's dilations within a window of w steps: 1, 2, 4, … while
    8·d + 1 ≤ w."""
    dilations = [1]
    while (TAPS - 1) * 2 * dilations[-1] + 1 <= window_size:
        dilations.append(2 * dilations[-1])
    return tuple(dilations)


@register_layer
class LocalFeatures(keras.layers.Layer):
    """The local structure around every step of a sequence, as one vector:
    what a bag-of-features quantizer should see instead of raw samples.

    A quantizer that sees one value per step (a univariate series) can only
    histogram amplitudes; the order of the values, the shape of the series,
    is lost. The neural bag-of-features work on time series therefore
    quantizes vectors of local structure: sub-sequences cut by a sliding
    window (Passalis, Tefas, Kanniainen, Gabbouj and Iosifidis, "Temporal
    bag-of-features learning for predicting mid price movements using high
    frequency limit order book data", IEEE TETCI 2020, and the NBoF for
    time series of Passalis et al., EUSIPCO 2017), or features learned by a
    convolution. For a sequence x_0 … x_{T−1} of D features, a window of w
    steps and a stride s ≤ w, output j (j = 0 … ⌈T / s⌉ − 1) ends at step
    e = s·j + s − 1:

    ```
    mode="window":  y_j = [x_{e−w+1}, …, x_{e−1}, x_e]       ∈ R^{w·D}
    mode="conv":    y_j = σ(Σ_{k=0}^{w−1} W_k x_{e−k} + b)    ∈ R^{filters}
    mode="kernels": y_j[d, c, m] = Σ_{k=0}^{8} v_{m,k} x_{e−8d+k·d, c}  ∈ R^{84·|dil|·D}
    ```

    with x_t = 0 outside the sequence, W_k ∈ R^{filters×D}. `"kernels"`
    are the fixed kernels of MiniRocket (Dempster, Schmidt and Webb,
    "MiniRocket: a very fast (almost) deterministic transform for time
    series classification", KDD 2021): v_m has nine taps, −1 except three
    that are 2, for each of the 84 choices of the three; each is applied to
    every feature c alone, at every dilation d = 1, 2, 4, … with
    8·d + 1 ≤ w, so the window bounds the reach (w ≥ 9), or at the
    `dilations` given (each within the window). The output is ordered by
    dilation, then feature, then kernel. With s = 1 the
    windows are causal (no output sees a later step) and there is one
    output per step; a stride s > 1 shortens a long series s times, output
    j summing up the s steps of block j and the w − s before them (s ≤ w,
    so that every step is seen). A masked step is taken as zeros wherever
    it falls in a window; output j is valid where any step of its block is.

    Args:
        mode: `"conv"` (default), a learned convolution, `"window"`,
            the raw sub-sequences, or `"kernels"`, MiniRocket's fixed
            kernels (these two have no weights).
        window_size: w, the steps in each window. Default 8.
        filters: The output width of `"conv"` (default 32); must be left
            `None` with `"window"`, whose width is w·D, and `"kernels"`.
        strides: s, a positive int at most `window_size`. Default 1.
        dilations: `"kernels"` only: the dilations d, a tuple of positive
            ints with 8·d + 1 ≤ w; default None, every power of two that
            fits (a model that treats the dilations apart makes a layer
            for each).
        activation: σ of `"conv"`; default `"relu"`.
        use_bias: Whether `"conv"` adds b. Default True. (σ, b and their
            options below act in `"conv"` only.)
        kernel_initializer, bias_initializer, kernel_regularizer,
            bias_regularizer, kernel_constraint, bias_constraint: Of W
            and b.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, D).
        mask: Optional boolean (batch, steps).

    Returns:
        (batch, ⌈steps / s⌉, filters), (batch, ⌈steps / s⌉, w·D) or
        (batch, ⌈steps / s⌉, 84·|dil|·D), with a mask: an output is valid
        where any step of its block is.

    Example:

    >>> import numpy as np
    >>> from keras_relrec.layers import LocalFeatures
    >>> x = np.arange(6, dtype="float32").reshape(1, 6, 1)
    >>> windows = LocalFeatures(mode="window", window_size=3, strides=2)
    >>> np.asarray(windows(x))[0].tolist()
    [[0.0, 0.0, 1.0], [1.0, 2.0, 3.0], [3.0, 4.0, 5.0]]
    """

    def __init__(
        self,
        mode="conv",
        window_size=8,
        filters=None,
        strides=1,
        dilations=None,
        activation="relu",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.mode = validation.check_choice("mode", mode, MODES)
        self.window_size = validation.check_positive_int("window_size", window_size)
        if self.mode != "conv" and filters is not None:
            raise ValueError(
                f"Argument `filters` must be None with mode={self.mode!r} (the output's width follows "
                f"from window_size and the features); received filters={filters!r}."
            )
        if self.mode == "kernels" and window_size < TAPS:
            raise ValueError(
                f"Argument `window_size` must be at least {TAPS} with mode='kernels' (a kernel spans "
                f"8·d + 1 steps); received window_size={window_size!r}."
            )
        self.filters = None if self.mode != "conv" else validation.check_positive_int(
            "filters", 32 if filters is None else filters)
        self.strides = validation.check_positive_int("strides", strides)
        if self.strides > self.window_size:
            raise ValueError(
                "Argument `strides` must be at most `window_size`, or steps between the windows would be "
                f"dropped; received strides={strides!r} with window_size={window_size!r}."
            )
        self._dilations = None
        if dilations is not None:
            given = tuple(dilations) if isinstance(dilations, (list, tuple)) else None
            fits = given and all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 and (TAPS - 1) * d + 1 <= window_size
                for d in given
            )
            if self.mode != "kernels" or not fits or len(set(given)) != len(given):
                raise ValueError(
                    "Argument `dilations` must be None, or with mode='kernels' distinct positive ints d with "
                    f"8·d + 1 <= window_size={window_size}; received dilations={dilations!r} with "
                    f"mode={self.mode!r}."
                )
            self._dilations = given
        self.activation = keras.activations.get(activation)
        self.use_bias = validation.check_bool("use_bias", use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.supports_masking = True

    @property
    def dilations(self):
        """The dilations of `"kernels"`: those given, or 1, 2, 4, … while
        8·d + 1 ≤ w."""
        if self.mode != "kernels":
            return ()
        if self._dilations is not None:
            return self._dilations
        return kernel_dilations(self.window_size)

    def build(self, input_shape):
        self.input_spec = validation.sequence_input_spec(self, input_shape)
        features = input_shape[-1]
        if self.mode == "kernels":
            taps = np.full((TAPS, KERNELS), -1.0)
            for m, chosen in enumerate(itertools.combinations(range(TAPS), 3)):
                taps[list(chosen), m] = 2.0
            # Each feature on its own: a block-diagonal kernel.
            kernel = np.zeros((TAPS, features, features * KERNELS))
            for c in range(features):
                kernel[:, c, KERNELS * c : KERNELS * (c + 1)] = taps
            # The nine taps of a feature side by side, rows k·D + f, for
            # one matmul. The fixed kernels are kept in NumPy and made
            # tensors in the compute dtype at each call (their -1, 0 and 2
            # are exact in any): a tensor made here would belong to the
            # graph of a first call traced in a function.
            self._fixed_kernel = kernel.reshape(TAPS * features, features * KERNELS)
            return
        if self.mode == "window":
            # The windows are a convolution with a fixed one-hot kernel:
            # output feature k·D + d is x_{t−w+1+k}, feature d.
            self._fixed_kernel = np.eye(self.window_size * features).reshape(
                self.window_size, features, self.window_size * features)
            return
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.window_size, features, self.filters),
            initializer=clone_initializer(self.kernel_initializer, "kernel"),
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(self.filters,),
                initializer=clone_initializer(self.bias_initializer, "bias"),
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )

    def call(self, inputs, mask=None):
        validation.check_mask(self, mask, inputs)
        # Masked steps are zeros inside every window: whatever they hold
        # never reaches an output or a gradient.
        inputs = zero_masked(ops.cast(inputs, self.compute_dtype), mask)
        batch, steps = ops.shape(inputs)[0], ops.shape(inputs)[1]
        count = (steps + self.strides - 1) // self.strides
        if self.mode == "kernels":
            return self._kernel_responses(inputs, batch, count)
        # Zeros around the sequence: window j covers steps s·j − (w − s)
        # to s·j + s − 1, so the last window ends at or after the last step.
        # One step more on the right keeps an empty sequence convolvable;
        # the extra window is cut off.
        padded = ops.pad(inputs, ((0, 0), (self.window_size - self.strides, self.strides), (0, 0)))
        kernel = ops.cast(self.kernel, self.compute_dtype) if self.mode == "conv" else self._constant_kernel()
        outputs = ops.conv(padded, kernel, strides=self.strides, padding="valid")
        # The reshape restores the width, which TensorFlow's convolution of
        # an empty batch does not give.
        outputs = ops.reshape(outputs[:, :count], (batch, count, kernel.shape[-1]))
        if self.mode == "window":
            return outputs
        if self.bias is not None:
            outputs = outputs + ops.cast(self.bias, self.compute_dtype)
        return self.activation(outputs)

    def _kernel_responses(self, inputs, batch, count):
        # The window ending at step t has taps t − 8·d, …, t − d, t. Only
        # every s-th window is kept, so each tap is read at stride s (a
        # strided slice of the sequence behind 8·d zeros) and the nine taps
        # meet the kernel in one matmul: s times less work than a dilated
        # convolution at every step, which TensorFlow cannot stride. The s
        # zeros on the right give the last block its end and an empty
        # sequence a window.
        kernel = self._constant_kernel()
        features = kernel.shape[0] // TAPS
        outputs = []
        for d in self.dilations:
            padded = ops.pad(inputs, ((0, 0), ((TAPS - 1) * d, self.strides), (0, 0)))
            taps = [padded[:, self.strides - 1 + k * d :: self.strides][:, :count] for k in range(TAPS)]
            windows = ops.reshape(ops.stack(taps, axis=2), (batch, count, TAPS * features))
            outputs.append(ops.matmul(windows, kernel))
        outputs = ops.concatenate(outputs, axis=-1) if len(outputs) > 1 else outputs[0]
        return ops.reshape(outputs, (batch, count, len(self.dilations) * kernel.shape[-1]))

    def _constant_kernel(self):
        return ops.convert_to_tensor(self._fixed_kernel, dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        if mask is None or self.strides == 1:
            return mask
        # Output j is valid where any of the s steps of its block is.
        steps = ops.shape(mask)[1]
        outputs = (steps + self.strides - 1) // self.strides
        mask = ops.pad(ops.cast(mask, "bool"), ((0, 0), (0, self.strides - 1)), constant_values=False)
        valid = mask[:, 0 :: self.strides][:, :outputs]
        for offset in range(1, self.strides):
            valid = ops.logical_or(valid, mask[:, offset :: self.strides][:, :outputs])
        return valid

    def compute_output_shape(self, input_shape):
        steps = input_shape[1]
        if steps is not None:
            steps = -(-steps // self.strides)
        features = input_shape[-1]
        width = {"window": self.window_size * features, "kernels": KERNELS * len(self.dilations) * features,
                 "conv": self.filters}[self.mode]
        return (input_shape[0], steps, width)

    def get_config(self):
        config = {
            "mode": self.mode,
            "window_size": self.window_size,
            "filters": self.filters,
            "strides": self.strides,
            "dilations": None if self._dilations is None else list(self._dilations),
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
            "bias_constraint": keras.constraints.serialize(self.bias_constraint),
        }
        return {**super().get_config(), **config}
