"""Autoregressive generation with a Transformer-XL's memories."""

import keras
import numpy as np

from keras_relrec.layers import TransformerXL
from keras_relrec.utils import validation

MODES = ("token", "segment")
SAMPLINGS = ("greedy", "sample")


class _Step(keras.layers.Layer):
    """tokens, states → (logits of every position, new states)."""

    def __init__(self, backbone, head, **kwargs):
        super().__init__(**kwargs)
        self.backbone, self.head = backbone, head

    def call(self, tokens, states):
        hidden, new_states = self.backbone.streaming_step(tokens, list(states))
        return [self.head(hidden), *new_states]


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

    Args:
        backbone: A built `TransformerXL` that embeds tokens.
        head: A layer from the backbone's outputs to logits.

    Example:

    ```python
    generator = TransformerXLGenerator(backbone, head)
    tokens = generator.generate(prompt, max_new_tokens=100, sampling="sample", seed=0)
    ```
    """

    def __init__(self, backbone, head):
        if not isinstance(backbone, TransformerXL) or backbone.vocabulary_size is None:
            raise ValueError(
                "TransformerXLGenerator needs a TransformerXL with a `vocabulary_size` (it feeds "
                f"back tokens); received backbone={backbone!r}."
            )
        if not backbone.built:
            raise ValueError("TransformerXLGenerator needs a built backbone: call it on tokens first.")
        self.backbone, self.head = backbone, head
        self._models = {}

    def _step_model(self, batch, length):
        """A compiled step (the backend's jit) for one input shape."""
        key = (batch, length)
        if key not in self._models:
            tokens = keras.Input((length,), batch_size=batch, dtype="int32")
            states = [keras.Input(shape, batch_size=batch, dtype=dtype)
                      for _, shape, dtype in self.backbone.streaming_state_specs()]
            outputs = _Step(self.backbone, self.head)(tokens, states)
            self._models[key] = keras.Model([tokens, *states], outputs)
        return self._models[key]

    def step(self, tokens, states):
        """Runs `tokens` (batch, steps) from `states`: (logits, new states)."""
        tokens = np.asarray(tokens, "int32")
        logits, *states = self._step_model(*tokens.shape).predict_on_batch([tokens, *states])
        return np.asarray(logits), [np.asarray(s) for s in states]

    def initial_state(self, batch):
        return [np.asarray(s) for s in self.backbone.get_initial_state(batch)]

    def generate(self, prompt, max_new_tokens, mode="token", sampling="greedy", temperature=1.0, seed=None):
        """The prompt followed by `max_new_tokens` generated tokens.

        Args:
            prompt: int (batch, P) token ids, P ≥ 1.
            max_new_tokens: How many tokens to add.
            mode: `"token"` or `"segment"` (see the class).
            sampling: `"greedy"` (the most likely token) or `"sample"` (from
                softmax(logits / temperature)).
            temperature: Positive; with `"sample"` only.
            seed: Seed of the sampling (NumPy).

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
        rng = np.random.default_rng(validation.check_numpy_seed(seed))
        batch, length = prompt.shape
        segment = self.backbone.segment_len
        # The prompt's whole segments go into the memories; in segment mode
        # the rest is the segment being written.
        whole = length - (length % segment if mode == "segment" else 0)
        states = self.initial_state(batch)
        logits = None
        for start in range(0, whole, segment):
            logits, states = self.step(prompt[:, start : start + segment], states)
        tokens = [prompt]
        pending = prompt[:, whole:]
        for _ in range(max_new_tokens):
            if mode == "segment" and pending.shape[1]:
                logits, new_states = self.step(pending, states)
                if pending.shape[1] == segment:
                    states, pending = new_states, pending[:, :0]
            token = self._choose(logits[:, -1], sampling, temperature, rng)
            tokens.append(token[:, None])
            if mode == "token":
                logits, states = self.step(token[:, None], states)
            else:
                pending = np.concatenate([pending, token[:, None]], axis=1)
        return np.concatenate(tokens, axis=1).astype("int32")

    @staticmethod
    def _choose(logits, sampling, temperature, rng):
        if sampling == "greedy":
            return np.argmax(logits, axis=-1)
        scaled = logits.astype("float64") / temperature
        p = np.exp(scaled - scaled.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return np.array([rng.choice(len(row), p=row) for row in p])

