"""Whether the graph being traced is for TensorFlow Lite for
Microcontrollers, whose kernels lack some ops and types that other
runtimes have (TOPK_V2, GATHER of int64 positions, SELECT of int32).

Within `micro_forms.tracing()` the ops that have a second form choose it:
`valid_steps_first` compacts by counting instead of a sort, the gathers of
`gathering` and the token embeddings become one-hot products, `roots.sqrt`
is x · rsqrt(x), `masked_softmax` uses the SOFTMAX op with no −inf, and the
segment summary's BiLSTM steps its cells. Each form gives the same values
(to float32's rounding); the compaction and the one-hot products cost time
and memory that grow with the product of the sizes involved, which suits a
microcontroller's short sequences. The export for `target="micro"` traces
the model within it.
"""

import contextlib
import contextvars

_MICRO = contextvars.ContextVar("micro_forms", default=False)


def enabled():
    """Whether the ops are being traced for TensorFlow Lite for Microcontrollers."""
    return _MICRO.get()


@contextlib.contextmanager
def tracing():
    """Within it, the ops take their TensorFlow Lite for Microcontrollers
    forms."""
    token = _MICRO.set(True)
    try:
        yield
    finally:
        _MICRO.reset(token)
