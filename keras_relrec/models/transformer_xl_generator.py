"""Autoregressive generation with a Transformer-XL's memories."""

import keras
import numpy as np
from keras import ops

from keras_relrec.layers import TransformerXL
from keras_relrec.utils import validation

MODES = ("token", "segment")
SAMPLINGS = ("greedy", "sample")
JIT_COMPILE = ("auto", True, False)


class _Step(keras.layers.Layer):
    """tokens, states → (logits of every position, new states)."""

    def __init__(self, backbone, head, **kwargs):
        super().__init__(**kwargs)
        self.backbone, self.head = backbone, head

    def call(self, tokens, states):
        hidden, new_states = self.backbone.streaming_step(tokens, list(states))
        return [self.head(hidden), *new_states]


class _Generation(keras.layers.Layer):
    """prompt (batch, P), uniforms (batch, N), temperature (batch, 1) → the
    N new tokens (batch, N): the prompt, then a loop over the new tokens,
    all in one call so that the backend compiles it whole. After the prompt
    the memories are kept as their keys and values (the backbone's
    `key_value_cache`), so a step projects only its own positions."""

    def __init__(self, backbone, head, mode, sampling, top_k, **kwargs):
        super().__init__(**kwargs)
        self.backbone, self.head = backbone, head
        self.mode, self.sampling, self.top_k = mode, sampling, top_k

    def call(self, prompt, uniforms, temperature):
        batch, length = prompt.shape
        count = uniforms.shape[1]
        states = list(self.backbone.get_initial_state(batch))
        if self.mode == "token":
            hidden, states = self.backbone.streaming_step(prompt, states)
            carry = (self._last_logits(hidden), *self._cache(states))
        else:
            carry = self._prompt_in_segments(prompt, states)

        def body(index, carry):
            tokens, logits, *rest = carry
            token = self._choose(logits, ops.slice(uniforms, (0, index), (batch, 1)), temperature)
            tokens = ops.slice_update(tokens, (0, index), token)
            return (tokens, *self._advance(token, *rest))

        tokens, *_ = ops.fori_loop(0, count, body, (ops.zeros((batch, count), "int32"), *carry))
        return tokens

    def _cache(self, states):
        return self.backbone.key_value_cache(states) if states else []

    def _run(self, tokens, cache):
        """The backbone on `tokens` (batch, L ≤ segment_len), all taken as
        valid, from `cache`: (outputs, next cache)."""
        if not cache:  # no memory
            return self.backbone.streaming_step(tokens, [])
        return self.backbone.call_with_cache(tokens, list(cache))

    def _last_logits(self, hidden):
        return self.head(hidden[:, -1:])[:, 0]

    def _advance(self, token, *rest):
        """After `token` (batch, 1): the next logits and what the loop carries."""
        if self.mode == "token":
            hidden, cache = self._run(token, rest)
            return (self._last_logits(hidden), *cache)
        pending, written, *cache = rest
        pending = ops.slice_update(pending, (0, written), token)
        return self._run_pending(pending, written + 1, cache)

    def _prompt_in_segments(self, prompt, states):
        """Segment mode: the prompt's whole segments go into the memories,
        the rest is the segment being written (`pending`, `written` of it)."""
        batch, length = prompt.shape
        segment = self.backbone.segment_len
        whole = length - length % segment
        logits = None
        if whole:
            hidden, states = self.backbone.streaming_step(prompt[:, :whole], states)
            logits = self._last_logits(hidden)
        pending = ops.pad(prompt[:, whole:], [[0, 0], [0, segment - (length - whole)]])
        written = ops.convert_to_tensor(length - whole, "int32")
        if whole == length:
            return (logits, pending, written, *self._cache(states))
        return self._run_pending(pending, written, self._cache(states))

    def _run_pending(self, pending, written, cache):
        """The segment being written, its first `written` positions valid,
        from the memories of its start; a full one moves into them. The
        positions after `written` cannot change those before (the attention
        is causal) and enter the memories only once written."""
        batch, segment = pending.shape
        hidden, new_cache = self._run(pending, cache)
        hidden = ops.slice(hidden, (0, written - 1, 0), (batch, 1, hidden.shape[-1]))
        full = written == segment
        cache = [ops.where(full, new, old) for new, old in zip(new_cache, cache)]
        return (self.head(hidden)[:, 0], pending, ops.where(full, 0, written), *cache)

    def _choose(self, logits, uniform, temperature):
        """The next token (batch, 1): the argmax, or a draw from
        softmax(logits / temperature) (over the top_k largest) by inverting
        its cumulative distribution at `uniform`."""
        if self.sampling == "greedy":
            return ops.cast(ops.argmax(logits, axis=-1), "int32")[:, None]
        dtype = "float64" if logits.dtype == "float64" else "float32"
        scaled = ops.cast(logits, dtype) / ops.cast(temperature, dtype)
        if self.top_k is not None:
            kth = ops.top_k(scaled, self.top_k)[0][:, -1:]
            scaled = ops.where(scaled < kth, ops.cast(-np.inf, dtype), scaled)
        cumulative = ops.cumsum(ops.softmax(scaled, axis=-1), axis=-1)
        below = ops.cast(cumulative < ops.cast(uniform, dtype) * cumulative[:, -1:], "int32")
        return ops.minimum(ops.sum(below, axis=-1, keepdims=True), logits.shape[-1] - 1)


class TransformerXLGenerator:
    """Generates tokens from a `TransformerXL` language model, reusing the
    memories instead of recomputing the context.

    The model is `head(backbone(tokens))`: `backbone` a built
    `TransformerXL` with a `vocabulary_size`, `head` maps its outputs to
    logits (e.g. `keras.layers.Dense(vocabulary_size)`). The prompt runs
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
    positions, not the whole memory. A call compiles once per (batch,
    prompt length, max_new_tokens, mode, sampling, top_k) and reuses it.

    Args:
        backbone: A built `TransformerXL` that embeds tokens.
        head: A layer from the backbone's outputs to logits.
        jit_compile: On TensorFlow, whether the loop is compiled with XLA
            (`True`) or runs as a TensorFlow graph (`False`); `"auto"`: XLA,
            the faster of the two in the benchmarks (`bench_vs_pytorch.py`
            times both). JAX always compiles with XLA.

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
        self.backbone, self.head = backbone, head
        self.jit_compile = validation.check_choice("jit_compile", jit_compile, JIT_COMPILE)
        self._models = {}

    def _compiled(self, key, build):
        """The model for `key`, built by `build()` on first use."""
        if key not in self._models:
            model = build()
            model.jit_compile = self.jit_compile != False  # noqa: E712 ("auto" compiles too)
            self._models[key] = model
        return self._models[key]

    def _step_model(self, batch, length):
        def build():
            tokens = keras.Input((length,), batch_size=batch, dtype="int32")
            states = [keras.Input(shape, batch_size=batch, dtype=dtype)
                      for _, shape, dtype in self.backbone.streaming_state_specs()]
            return keras.Model([tokens, *states], _Step(self.backbone, self.head)(tokens, states))
        return self._compiled(("step", batch, length), build)

    def step(self, tokens, states):
        """Runs `tokens` (batch, steps) from `states`: (logits, new states)."""
        tokens = np.asarray(tokens, "int32")
        logits, *states = self._step_model(*tokens.shape).predict_on_batch([tokens, *states])
        return np.asarray(logits), [np.asarray(s) for s in states]

    def initial_state(self, batch):
        return [np.asarray(s) for s in self.backbone.get_initial_state(batch)]

    def _generation_model(self, batch, length, count, mode, sampling, top_k):
        def build():
            prompt = keras.Input((length,), batch_size=batch, dtype="int32")
            uniforms = keras.Input((count,), batch_size=batch, dtype="float32")
            temperature = keras.Input((1,), batch_size=batch, dtype="float32")
            generation = _Generation(self.backbone, self.head, mode, sampling, top_k)
            return keras.Model([prompt, uniforms, temperature], generation(prompt, uniforms, temperature))
        return self._compiled(("generate", batch, length, count, mode, sampling, top_k), build)

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
        uniforms = rng.random((batch, max_new_tokens), dtype="float32")
        model = self._generation_model(batch, length, max_new_tokens, mode, sampling, top_k)
        new = model.predict_on_batch([prompt.astype("int32"), uniforms, np.full((batch, 1), temperature, "float32")])
        return np.concatenate([prompt, np.asarray(new)], axis=1).astype("int32")
