"""2-D attention for the neural bag-of-features family (Tran et al. 2022)."""

import keras
from keras import ops

from keras_relrec.constraints import UnitInterval
from keras_relrec.ops import zero_masked
from keras_relrec.ops.two_d_attention import two_d_attention
from keras_relrec.ops.two_d_attention import two_d_attention_weights
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import Constant
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer
from keras_relrec.utils.same_shape import SameShapeAndMask

AXES = (1, 2)


@register_layer
class TwoDAttention(SameShapeAndMask, keras.layers.Layer):
    """2-D attention over one axis of a (batch, steps, features) matrix.

    Tran, Passalis, Tefas, Gabbouj and Iosifidis, "Attention-based neural
    bag-of-features learning for sequence data", IEEE Access 10, 2022. For
    each example's matrix S, with L the length of the attended axis:

    ```
    W' = W with its diagonal set to 1/L          (on every call)
    E  = S W'  (mixing along the attended axis)
    A  = softmax(E) along the attended axis
    S̃  = τ (S ⊙ A) + (1 − τ) S,                  τ ∈ [0, 1]
    ```

    `axis=1` attends over the steps (the paper's temporal attention on the
    memberships Φ: which steps matter), `axis=2` over the features (its
    codeword attention on Φ, or the input attention on the raw input X
    before the quantizer of the lecture "Sequence processing", course
    Advanced Deep Learning: which features matter at each step). W is
    (L, L), initialised to 1/L everywhere so that A starts uniform; τ starts
    at 0.5 and a `UnitInterval` constraint clips it to [0, 1] after every
    update, as the authors clip it. (The authors' code calls 1 − τ `alpha`.)
    With a mask, masked steps are taken as zeros, whatever they hold (their
    outputs are zeros), and with `axis=1` they get no attention; the mask is
    passed on.

    Cost: W has L² weights, e.g. 576 for 24 steps but 182,329 for 427,
    and E costs L² multiply-adds per column. `rank=r` learns instead
    W = 1/L + U Vᵀ with U, V ∈ R^{L×r} (2·L·r weights: 6,832 for 427 steps
    at r = 8), computed without forming W; U starts random, V at zero, so
    that A starts uniform as with the full W.

    τ trades the attended copy against the input. As A sums to 1 along the
    attended axis, S ⊙ A is about L times smaller than S, so raising τ
    also shrinks the output; where the reweighting carries less than the
    plain S, training drives τ to 0, and the layer passes S through
    unchanged (the model is then the one without this attention).

    Args:
        axis: 1 (steps) or 2 (features), the attended axis. Default 1.
        initial_tau: τ's initial value in [0, 1]. Default 0.5.
        trainable_tau: Whether τ learns. Default True.
        rank: None (default) for the full L × L W of the paper, or a
            positive int r < L for W = 1/L + U Vᵀ.
        kernel_initializer: Of W, default the constant 1/L; with `rank`,
            of U and V (default: U random normal with deviation 1/√L, V
            zeros).
        kernel_regularizer, kernel_constraint: Of W (or of U and V).
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, features); the attended axis must have a
            fixed length.
        mask: Optional boolean (batch, steps).

    Returns:
        S̃, the input's shape.

    Attributes:
        tau: The τ weight. `attention_weights(inputs, mask=None)` returns
            A for a batch.

    Example:

    >>> import keras, numpy as np
    >>> from keras_relrec.layers import TwoDAttention
    >>> x = np.random.default_rng(0).random((2, 5, 3)).astype("float32")
    >>> temporal = TwoDAttention(axis=1)
    >>> tuple(temporal(x).shape)
    (2, 5, 3)
    >>> a = keras.ops.convert_to_numpy(temporal.attention_weights(x))
    >>> bool(np.allclose(a.sum(axis=1), 1.0))  # softmax over the steps
    True
    """

    def __init__(
        self,
        axis=1,
        initial_tau=0.5,
        trainable_tau=True,
        rank=None,
        kernel_initializer=None,
        kernel_regularizer=None,
        kernel_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.axis = validation.check_choice("axis", axis, AXES)
        self.initial_tau = validation.check_unit_interval("initial_tau", initial_tau)
        self.trainable_tau = validation.check_bool("trainable_tau", trainable_tau)
        self.rank = None if rank is None else validation.check_positive_int("rank", rank)
        self.kernel_initializer = (
            None if kernel_initializer is None else keras.initializers.get(kernel_initializer)
        )
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[self.axis] is None:
            name = "steps" if self.axis == 1 else "features"
            raise ValueError(
                f"TwoDAttention(axis={self.axis}) expects inputs (batch, steps, "
                f"features) with a fixed number of {name} (W is square over the "
                f"attended axis); received input of shape {tuple(input_shape)}."
            )
        length = input_shape[self.axis]
        if length == 0:
            raise ValueError(
                f"TwoDAttention(axis={self.axis}) needs at least one "
                f"{'step' if self.axis == 1 else 'feature'}; received input of shape "
                f"{tuple(input_shape)}."
            )
        if self.rank is not None and self.rank >= length:
            raise ValueError(
                f"Argument `rank` must be below the attended length {length} (or None for the full "
                f"{length} × {length} W); received rank={self.rank!r}."
            )
        self.input_spec = keras.layers.InputSpec(ndim=3, axes={self.axis: length})
        if self.rank is None:
            self.kernel = self._add_kernel("kernel", (length, length), Constant(1.0 / length))
        else:
            self.kernel_left = self._add_kernel(
                "kernel_left", (length, self.rank), keras.initializers.RandomNormal(stddev=length**-0.5)
            )
            self.kernel_right = self._add_kernel("kernel_right", (length, self.rank), "zeros")
        self.tau = self.add_weight(
            name="tau",
            shape=(),
            initializer=Constant(self.initial_tau),
            constraint=UnitInterval(),
            trainable=self.trainable_tau,
        )

    def _add_kernel(self, name, shape, default_initializer):
        initializer = (
            keras.initializers.get(default_initializer) if self.kernel_initializer is None
            else clone_initializer(self.kernel_initializer, name)
        )
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )

    def _kernel(self):
        """W, or its factors (U, V), in the compute dtype."""
        if self.rank is None:
            return ops.cast(self.kernel, self.compute_dtype)
        return (ops.cast(self.kernel_left, self.compute_dtype), ops.cast(self.kernel_right, self.compute_dtype))

    @property
    def acts_per_step(self):
        """Attention over the features mixes each step on its own, so the
        layer streams frame by frame (see
        `keras_relrec.layers.streaming_layer`); over the steps it is not."""
        return self.axis == 2

    def attention_weights(self, inputs, mask=None):
        """A, the attention over the attended axis; the input's shape."""
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        validation.check_mask(self, mask, inputs)
        if not self.built:
            self.build(inputs.shape)
        return two_d_attention_weights(inputs, self._kernel(), self.axis, mask if self.axis == 1 else None)

    def call(self, inputs, mask=None):
        validation.check_mask(self, mask, inputs)
        # Masked steps are taken as zeros (their outputs too): whatever they
        # hold never reaches an output or a gradient. Integers are values.
        inputs = zero_masked(ops.cast(inputs, self.compute_dtype), mask)
        tau = ops.cast(self.tau, self.compute_dtype)
        return two_d_attention(inputs, self._kernel(), tau, self.axis, mask if self.axis == 1 else None)

    def get_config(self):
        config = {
            "axis": self.axis,
            "initial_tau": self.initial_tau,
            "trainable_tau": self.trainable_tau,
            "rank": self.rank,
            "kernel_initializer": (
                None if self.kernel_initializer is None
                else keras.initializers.serialize(self.kernel_initializer)
            ),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
        }
        return {**super().get_config(), **config}
