"""Loading the weights of the public R-Transformer code (PyTorch, DSE-MSU/
R-transformer, `models/RTransformer.py`) into `RTransformerBlock`.

The state dict of one `Block` as NumPy arrays (or of `RTransformer`, whose
blocks are `forward_net.<i>.`: pass that as `prefix`). PyTorch's `Linear`
keeps its weight as (out, in): our kernels are its transpose. PyTorch's
recurrent layers keep two biases and order their gates otherwise:

| R-Transformer (`Block`)                       | keras_relrec (`RTransformerBlock`)                 |
|-----------------------------------------------|----------------------------------------------------|
| layers.n.connection.norm.{a_2,b_2}            | local_n_norm.{gamma,beta}                          |
| layers.n.local_rnn.rnn.weight_ih_l0           | local_n_cell.kernel (transposed, gates reordered)  |
| layers.n.local_rnn.rnn.weight_hh_l0           | local_n_cell.recurrent_kernel (the same)           |
| layers.n.local_rnn.rnn.bias_ih_l0, bias_hh_l0 | local_n_cell.bias (GRU: both rows; else their sum) |
| pooling.linears.{0,1,2,3}.{weight,bias}       | attention_{query,key,value,output}.{kernel,bias}   |
| connections.0.norm.{a_2,b_2}                  | attention_norm.{gamma,beta}                        |
| feed_forward.w_1, w_2 .{weight,bias}          | feed_forward_inner, feed_forward_output            |
| connections.1.norm.{a_2,b_2}                  | feed_forward_norm.{gamma,beta}                     |

Gates: PyTorch's GRU is (r, z, n) and Keras' (z, r, h) with the same
equations as Keras' `reset_after=True`; the LSTM's (i, f, g, o) is Keras'
(i, f, c, o). `layers.n.local_rnn.output.*`, a projection the reference
builds but never calls, is not loaded (it is returned).
"""

import numpy as np

from keras_relrec.migrate.state_dict import assign
from keras_relrec.migrate.state_dict import take

SOURCE = "R-Transformer"


def _gates(array, cell, width):
    """PyTorch's gate blocks (on axis 0) in Keras' order."""
    if cell != "gru":
        return array
    r, z, n = (array[k * width : (k + 1) * width] for k in range(3))
    return np.concatenate([z, r, n], axis=0)


def load_r_transformer_block(block, state_dict, prefix=""):
    """Loads one reference `Block` into a built `RTransformerBlock`.

    Args:
        block: A built `keras_relrec.layers.RTransformerBlock` of the same
            configuration (width, heads, N, cell; `norm="reference"` for the
            same outputs).
        state_dict: {name: array} (PyTorch tensors converted with `.numpy()`).
        prefix: What comes before the block's names, e.g. `"forward_net.0."`.

    Returns:
        The names of the block that were not loaded (the unused projections
        `layers.n.local_rnn.output.*`).

    Raises:
        ValueError: the block is not built, a weight is missing, has
            another shape, is not numbers or holds a NaN or inf, or the state
            dict has more local layers; the block's weights are then left as
            they were.
    """
    if not block.built:
        raise ValueError("load_r_transformer_block needs a built RTransformerBlock: call it on an input first.")
    width = block.attention_dense["query"].kernel.shape[0]
    inner = block.feed_forward_inner.kernel.shape[1]
    gates = {"gru": 3, "lstm": 4, "simple_rnn": 1}[block.cell]
    used = set()

    def get(name, shape):
        return take(state_dict, prefix + name, shape, used, SOURCE)

    def norm(layer, name):
        return [(layer.gamma, get(f"{name}.a_2", (width,))), (layer.beta, get(f"{name}.b_2", (width,)))]

    values = []
    for n, (layer, local) in enumerate(zip(block.norms, block.local_layers)):
        values += norm(layer, f"layers.{n}.connection.norm")
        rnn, cell = f"layers.{n}.local_rnn.rnn.", local.cell
        values += [
            (cell.kernel, _gates(get(rnn + "weight_ih_l0", (gates * width, width)), block.cell, width).T),
            (cell.recurrent_kernel, _gates(get(rnn + "weight_hh_l0", (gates * width, width)), block.cell, width).T),
        ]
        biases = [_gates(get(rnn + f"bias_{kind}_l0", (gates * width,)), block.cell, width) for kind in ("ih", "hh")]
        values.append((cell.bias, np.stack(biases) if block.cell == "gru" else biases[0] + biases[1]))
    for k, part in enumerate(("query", "key", "value", "output")):
        dense = block.attention_dense[part]
        values += [(dense.kernel, get(f"pooling.linears.{k}.weight", (width, width)).T),
                   (dense.bias, get(f"pooling.linears.{k}.bias", (width,)))]
    values += norm(block.norms[-2], "connections.0.norm")
    values += [
        (block.feed_forward_inner.kernel, get("feed_forward.w_1.weight", (inner, width)).T),
        (block.feed_forward_inner.bias, get("feed_forward.w_1.bias", (inner,))),
        (block.feed_forward_output.kernel, get("feed_forward.w_2.weight", (width, inner)).T),
        (block.feed_forward_output.bias, get("feed_forward.w_2.bias", (width,))),
    ]
    values += norm(block.norms[-1], "connections.1.norm")
    names = [k for k in state_dict if k.startswith(prefix)]
    extra = {int(k[len(prefix):].split(".")[1]) for k in names if k[len(prefix):].startswith("layers.")}
    if extra != set(range(block.num_local_layers)):
        raise ValueError(
            f"load_r_transformer_block: the state dict has {len(extra)} local layers; the block has "
            f"{block.num_local_layers}."
        )
    assign(values)
    return [k for k in names if k not in used]
