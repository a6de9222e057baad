"""Autoregressive generation with a Transformer-XL's memories."""

import keras
import numpy as np
from keras import ops

from keras_relrec.layers import TransformerXL
from keras_relrec.utils import validation

MODES = ("token", "segment")
SAMPLINGS = ("greedy", "sample")


class _Step(keras.layers.Layer):
    """tokens, states → (logits of every position, or of the last one with
    `last_only`, new states)."""

    def __init__(self, backbone, head, last_only=False, **kwargs):
        super().__init__(**kwargs)
        self.backbone, self.head, self.last_only = backbone, head, last_only

    def call(self, tokens, states):
        hidden, new_states = self.backbone.streaming_step(tokens, list(states))
        # Generation reads the last position only: over a large vocabulary
        # the others' logits would cost as much as the step.
        return [self.head(hidden[:, -1:] if self.last_only else hidden), *new_states]


class _Generation(keras.layers.Layer):
    """After the prompt: its states, the logits of its last position (and in
    segment mode the segment being written, its first `written` positions
    valid), uniforms (batch, N) and temperature (batch, 1) → the N new
    tokens (batch, N), in one call so that the backend compiles the loop
    whole. The memories are kept as their keys and values (the backbone's
    `key_value_cache`), so a step projects only its own positions."""

    def __init__(self, backbone, head, mode, sampling, top_k, **kwargs):
        super().__init__(**kwargs)
        self.backbone, self.head = backbone, head
        self.mode, self.sampling, self.top_k = mode, sampling, top_k

    def call(self, states, logits, uniforms, temperature, pending=None, written=None):
        batch, count = uniforms.shape
        # Indices as int32 tensors: under JAX's x64 a Python 0 would be int64.
        zero = ops.zeros((), "int32")
        cache = self.backbone.key_value_cache(list(states)) if states else []
        carry = (logits, *cache) if self.mode == "token" else (logits, pending, written[0, 0], *cache)

        def body(index, carry):
            tokens, logits, *rest = carry
            index = ops.cast(index, "int32")
            token = self._choose(logits, ops.slice(uniforms, (zero, index), (batch, 1)), temperature)
            tokens = ops.slice_update(tokens, (zero, index), token)
            return (tokens, *self._advance(token, *rest))

        tokens, *_ = ops.fori_loop(0, count, body, (ops.zeros((batch, count), "int32"), *carry))
        return tokens

    def _run(self, tokens, cache):
        """The backbone on `tokens` (batch, L ≤ segment_len), all taken as
        valid, from `cache`: (outputs, next cache)."""
        if not cache:  # no memory
            return self.backbone.streaming_step(tokens, [])
        return self.backbone.call_with_cache(tokens, list(cache))

    def _advance(self, token, *rest):
        """After `token` (batch, 1): the next logits and what the loop carries."""
        if self.mode == "token":
            hidden, cache = self._run(token, rest)
            return (self.head(hidden)[:, 0], *cache)
        pending, written, *cache = rest
        zero = ops.zeros((), "int32")
        pending = ops.slice_update(pending, (zero, written), token)
        written = written + 1
        # The segment being written, from the memories of its start; a full
        # one moves into them. Its positions after `written` cannot change
        # those before (the attention is causal).
        batch, segment = pending.shape
        hidden, new_cache = self._run(pending, cache)
        hidden = ops.slice(hidden, (zero, written - 1, zero), (batch, 1, hidden.shape[-1]))
        full = written == segment
        cache = [ops.where(full, new, old) for new, old in zip(new_cache, cache)]
        return (self.head(hidden)[:, 0], pending, ops.where(full, zero, written), *cache)

    def _choose(self, logits, uniform, temperature):
        """The next token (batch, 1): the argmax, or a draw from
        softmax(logits / temperature) (over the top_k largest) by inverting
        its cumulative distribution at `uniform`."""
        if self.sampling == "greedy":
            return ops.cast(ops.argmax(logits, axis=-1), "int32")[:, None]
        dtype = "float64" if logits.dtype == "float64" else "float32"
        logits = ops.cast(logits, dtype)
        # The maximum first: a small temperature cannot overflow the rest.
        scaled = (logits - ops.max(logits, axis=-1, keepdims=True)) / ops.cast(temperature, dtype)
        if self.top_k is not None:
            kth = ops.top_k(scaled, self.top_k)[0][:, -1:]
            scaled = ops.where(scaled < kth, ops.cast(-np.inf, dtype), scaled)
        cumulative = ops.cumsum(ops.softmax(scaled, axis=-1), axis=-1)
        below = ops.cast(cumulative < ops.cast(uniform, dtype) * cumulative[:, -1:], "int32")
        return ops.cast(ops.minimum(ops.sum(below, axis=-1, keepdims=True), logits.shape[-1] - 1), "int32")


class TransformerXLGenerator:
    """Generates tokens from a `TransformerXL` language model, reusing the
    memories instead of recomputing the context.

    The model is `head(backbone(tokens))`: `backbone` a built
    `TransformerXL` with a `vocabulary_size`, `head` maps its outputs to
    logits (e.g. `keras.layers.Dense(vocabulary_size)`) or to
    log-probabilities (an `AdaptiveSoftmax`). The prompt runs
    segment by segment, as in training; then, per new token:

    - `mode="token"` (the paper's fast evaluation): the token is a segment
      of its own; it attends to the last `mem_len` positions and itself, at
      a cost that does not grow with the position in the stream.
    - `mode="segment"`: the token joins the segment being written, which is
      recomputed from the memories of its start, so every position sees
      exactly what it saw in training; a full segment moves into the
      memories. Costs up to `segment_len` times more per token.

    `generate` runs the prompt and every new token in one compiled call (the
    backend's jit: XLA on JAX; on TensorFlow, see `jit_compile`): the
    sampling happens on the device and the memories never leave it, so a
    token costs one step of the model and no round trip to Python. After
    the prompt the memories are kept as their keys and values
    (`SegmentRecurrence.key_value_cache`), so a step projects only its own
    positions, not the whole memory. The prompt runs segment by segment
    through a compiled step (one per segment length); the loop compiles
    once per (batch, max_new_tokens, mode, sampling, top_k) and is reused.
    The sampling's cumulative distribution is summed in float32 (float64
    under the float64 policy): over a vocabulary of hundreds of thousands
    its rounding moves a few tenths of a percent of probability.

    Args:
        backbone: A built `TransformerXL` that embeds tokens.
        head: A layer from the backbone's outputs to logits (or
            log-probabilities).
        jit_compile: On TensorFlow, whether the loop is compiled with XLA
            (`True`) or runs as a TensorFlow graph (`False`); `"auto"`: XLA
            (benchmarks/RESULTS.md compares the two: XLA is the faster at
            small sizes, the graph at WT103's on a CPU). JAX always
            compiles with XLA, whatever this says.

    Example:

    ```python
    generator = TransformerXLGenerator(backbone, head)
    tokens = generator.generate(prompt, max_new_tokens=100, sampling="sample", top_k=40, seed=0)
    ```
    """

    def __init__(self, backbone, head, jit_compile="auto"):
        if not isinstance(backbone, TransformerXL) or backbone.vocabulary_size is None:
            raise ValueError(
                "TransformerXLGenerator needs a TransformerXL with a `vocabulary_size` (it feeds "
                f"back tokens); received backbone={backbone!r}."
            )
        if not backbone.built:
            raise ValueError("TransformerXLGenerator needs a built backbone: call it on tokens first.")
        if not isinstance(head, keras.layers.Layer):
            raise ValueError(
                "TransformerXLGenerator needs `head`, a Keras layer from the backbone's outputs to logits, "
                f"e.g. keras.layers.Dense(vocabulary_size); received head={head!r}."
            )
        self.backbone, self.head = backbone, head
        self.jit_compile = validation.check_choice("jit_compile", jit_compile, validation.JIT_COMPILE)
        self._models = {}

    def _compiled(self, key, build):
        """The model for `key`, built by `build()` on first use."""
        if key not in self._models:
            model = build()
            # "auto" compiles too; Keras would leave JAX uncompiled with False.
            model.jit_compile = self.jit_compile is not False or keras.backend.backend() == "jax"
            self._models[key] = model
        return self._models[key]

    def _step_model(self, batch, length, last_only):
        def build():
            tokens = keras.Input((length,), batch_size=batch, dtype="int32")
            states = [keras.Input(shape, batch_size=batch, dtype=dtype)
                      for _, shape, dtype in self.backbone.streaming_state_specs()]
            step = _Step(self.backbone, self.head, last_only, dtype=self.backbone.dtype_policy)
            return keras.Model([tokens, *states], step(tokens, states))
        return self._compiled(("step", batch, length, last_only), build)

    def step(self, tokens, states, last_only=False):
        """Runs `tokens` (batch, steps) from `states`: (logits (batch,
        steps, vocabulary), new states); with `last_only`, the logits of
        the last position alone (batch, 1, vocabulary), as `generate`
        reads them."""
        tokens = np.asarray(tokens, "int32")
        outputs = self._step_model(*tokens.shape, last_only).predict_on_batch([tokens, *states])
        # Without memory the model has one output, not a list.
        logits, *states = outputs if isinstance(outputs, (list, tuple)) else [outputs]
        return np.asarray(logits), [np.asarray(s) for s in states]

    def initial_state(self, batch):
        return [np.asarray(s) for s in self.backbone.get_initial_state(batch)]

    def _generation_model(self, batch, count, mode, sampling, top_k, logits_dtype):
        def build():
            states = [keras.Input(shape, batch_size=batch, dtype=dtype)
                      for _, shape, dtype in self.backbone.streaming_state_specs()]
            logits = keras.Input((self.backbone.vocabulary_size,), batch_size=batch, dtype=logits_dtype)
            uniforms = keras.Input((count,), batch_size=batch, dtype="float32")
            temperature = keras.Input((1,), batch_size=batch, dtype="float32")
            inputs = [states, logits, uniforms, temperature]
            if mode == "segment":
                inputs += [keras.Input((self.backbone.segment_len,), batch_size=batch, dtype="int32"),
                           keras.Input((1,), batch_size=batch, dtype="int32")]
            # The wrappers take the backbone's policy: under the global one
            # Keras would cast a float64 backbone's memories to float32.
            generation = _Generation(self.backbone, self.head, mode, sampling, top_k,
                                     dtype=self.backbone.dtype_policy)
            return keras.Model(inputs, generation(*inputs))
        return self._compiled(("generate", batch, count, mode, sampling, top_k, logits_dtype), build)

    def generate(self, prompt, max_new_tokens, mode="token", sampling="greedy", temperature=1.0, top_k=None,
                 seed=None):
        """The prompt followed by `max_new_tokens` generated tokens.

        Args:
            prompt: int (batch, P) token ids, P ≥ 1.
            max_new_tokens: How many tokens to add.
            mode: `"token"` or `"segment"` (see the class).
            sampling: `"greedy"` (the most likely token) or `"sample"` (from
                softmax(logits / temperature)).
            temperature: Positive; with `"sample"` only.
            top_k: With `"sample"`: draw among the `top_k` most likely
                tokens only (tokens tied with the k-th stay in); None: all.
            seed: Seed of the sampling (NumPy's `default_rng`): the same
                seed draws the same tokens on the same backend.

        Returns:
            int32 (batch, P + max_new_tokens).
        """
        prompt = np.asarray(prompt)
        if prompt.ndim != 2 or prompt.shape[1] == 0 or not np.issubdtype(prompt.dtype, np.integer):
            raise ValueError(
                f"Argument `prompt` must be integer token ids of shape (batch, P) with P ≥ 1; "
                f"received {prompt.dtype} of shape {prompt.shape}."
            )
        vocabulary = self.backbone.vocabulary_size
        if prompt.min() < 0 or prompt.max() >= vocabulary:
            raise ValueError(f"Argument `prompt` holds token ids outside [0, {vocabulary}).")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(
                f"Argument `max_new_tokens` must be a non-negative integer; received {max_new_tokens!r}."
            )
        validation.check_choice("mode", mode, MODES)
        validation.check_choice("sampling", sampling, SAMPLINGS)
        temperature = validation.check_positive_float("temperature", temperature)
        if not np.float32(temperature) > 0:
            raise ValueError(
                f"Argument `temperature` is taken in float32, where {temperature!r} is 0; pass at least "
                f"{np.finfo('float32').smallest_subnormal}, or sampling=\"greedy\"."
            )
        if top_k is not None:
            top_k = validation.check_positive_int("top_k", top_k)
            if sampling != "sample" or top_k > vocabulary:
                raise ValueError(
                    f"Argument `top_k` draws among the k most likely of the {vocabulary} tokens with "
                    f"sampling=\"sample\"; received top_k={top_k!r} with sampling={sampling!r}. Pass "
                    f"sampling=\"sample\" and 1 ≤ top_k ≤ {vocabulary}, or top_k=None."
                )
        rng = np.random.default_rng(validation.check_numpy_seed(seed))
        if max_new_tokens == 0:
            return prompt.astype("int32")
        batch, length = prompt.shape
        segment = self.backbone.segment_len
        prompt = prompt.astype("int32")
        # The prompt segment by segment (a compiled step per segment length,
        # whatever the prompt's); in segment mode its last, partial segment
        # is the one being written.
        whole = length - (length % segment if mode == "segment" else 0)
        states = self.initial_state(batch)
        logits = None
        for start in range(0, whole, segment):
            logits, states = self.step(prompt[:, start : start + segment], states, last_only=True)
        rest = prompt[:, whole:]
        extra = []
        if mode == "segment":
            if rest.shape[1]:
                logits, _ = self.step(rest, states, last_only=True)
            extra = [np.pad(rest, [[0, 0], [0, segment - rest.shape[1]]]), np.full((batch, 1), rest.shape[1], "int32")]
        # In (0, 1]: u = 0 would pick the first token whatever its probability.
        uniforms = 1.0 - rng.random((batch, max_new_tokens), dtype="float32")
        model = self._generation_model(batch, max_new_tokens, mode, sampling, top_k, str(logits.dtype))
        new = model.predict_on_batch([states, logits[:, -1], uniforms, np.full((batch, 1), temperature, "float32"),
                                      *extra])
        return np.concatenate([prompt, np.asarray(new)], axis=1).astype("int32")
