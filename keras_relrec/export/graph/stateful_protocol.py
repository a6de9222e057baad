"""The export's side of streaming: reading it off any layer of a model.

The contract — `StreamingLayer`'s three methods and optional members, and
the `acts_per_step` and `output_is_first_state` attributes — is documented
in one place, `keras_relrec/layers/streaming_layer.py`. `StatefulLayer`,
this package's public name for it, is that class.

`tests/export/test_stateful_protocol.py` defines a layer that is not an RNN
— a causal convolution whose state is the last `kernel_size − 1` frames —
and exports it through this protocol without subclassing the base class.
"""

from keras_relrec.layers.streaming_layer import StreamingLayer

StatefulLayer = StreamingLayer


def acts_per_step(layer):
    """Whether `layer` declares that it acts on each time step alone; any
    layer may (Keras' and users' too), so an absent attribute means False."""
    return bool(getattr(layer, "acts_per_step", False))


def output_is_first_state(cell):
    """Whether a cell declares that its output is its first state; any cell
    may (Keras' and users' too), so an absent attribute means False."""
    return bool(getattr(cell, "output_is_first_state", False))


def streaming_refusal(streamer):
    """The streamer's own reason not to stream, or None. A layer that
    implements `StreamingLayer`'s methods without subclassing it may lack
    the optional ones: it gets the base class's default."""
    if hasattr(streamer, "streaming_refusal"):
        return streamer.streaming_refusal()
    return StreamingLayer.streaming_refusal(streamer)


def chunk_length(streamer):
    """How many frames the streamer steps by (None: one), with
    `StreamingLayer`'s default for a layer that does not subclass it."""
    return getattr(streamer, "streaming_chunk_length", StreamingLayer.streaming_chunk_length)
