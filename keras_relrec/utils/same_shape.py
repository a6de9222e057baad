"""What a layer whose output has its input's shape says to Keras."""


class SameShapeAndMask:
    """Mixin, before `keras.layers.Layer` in the bases, of a layer whose
    output has the shape of its input and carries its mask on."""

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)
