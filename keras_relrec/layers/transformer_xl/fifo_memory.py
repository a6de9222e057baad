"""Transformer-XL's memory: each layer's last positions."""

import keras

from keras_relrec.layers.transformer_xl.memory_policy import MASK_DTYPE
from keras_relrec.layers.transformer_xl.memory_policy import MemoryPolicy
from keras_relrec.ops.relative_attention import update_memory
from keras_relrec.utils.registration import PACKAGE


@keras.saving.register_keras_serializable(package=PACKAGE)
class FifoMemory(MemoryPolicy):
    """Transformer-XL's memory (Dai et al., "Transformer-XL: Attentive
    language models beyond a fixed-length context", ACL 2019): layer n
    attends to its own inputs over the last `mem_len` positions,

    ```
    m_(τ+1)^n = SG([m_τ^n; h_τ^(n−1)])[last mem_len positions]
    ```

    The states are `[memory_0, …, memory_(num_layers−1), memory_mask]`:
    each memory (batch, mem_len, hidden_dim), and memory_mask (batch,
    mem_len), 1 for slots that hold a position (float32); none with
    `mem_len=0`. Slots start empty and masked. The padding of a call's last
    segment never enters the memories.

    Args:
        mem_len: M, memory positions per layer; 0: no memory.
        **kwargs: Base `Layer` arguments.

    Example:

    ```python
    backbone = keras_relrec.layers.SegmentRecurrence(
        num_layers=2, num_heads=2, head_size=8, hidden_dim=16, intermediate_dim=32,
        segment_len=4, memory=keras_relrec.layers.FifoMemory(mem_len=8))
    ```
    """

    supports_same_length = property(lambda self: self.mem_len > 0)

    def __init__(self, mem_len, **kwargs):
        super().__init__(**kwargs)
        if isinstance(mem_len, bool) or not isinstance(mem_len, int) or mem_len < 0:
            raise ValueError(f"Argument `mem_len` must be a non-negative integer; received mem_len={mem_len!r}.")
        self.mem_len = mem_len

    def state_specs(self):
        if not self.mem_len:
            return []
        memory = (self.mem_len, self.hidden_dim)
        specs = [(f"memory_{n}", memory, self.state_dtype) for n in range(self.num_layers)]
        return specs + [("memory_mask", (self.mem_len,), MASK_DTYPE)]

    def read(self, hidden, mask, states, stack, training):
        if not self.mem_len:
            return [{}] * self.num_layers
        return [{"memory": memory, "memory_mask": states[-1]} for memory in states[:-1]]

    def update(self, states, layer_inputs, outputs, mask, steps):
        """Each memory takes its layer's first `steps` inputs, not the
        padding after them (the block's own new memory would take it)."""
        if not self.mem_len:
            return []
        new_memories = [update_memory(memory, inputs, steps) for memory, inputs in zip(states[:-1], layer_inputs)]
        return new_memories + [update_memory(states[-1], self.segment_valid(outputs, mask), steps)]

    def get_config(self):
        return {**super().get_config(), "mem_len": self.mem_len}
