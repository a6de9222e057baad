"""What the importer tests compare: a model's weights, bit for bit."""


def weights_bytes(model):
    """The bytes of every weight of `model`, in order."""
    return [v.numpy().tobytes() for v in model.weights]
