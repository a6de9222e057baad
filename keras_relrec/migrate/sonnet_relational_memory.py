"""Loading a Sonnet 1 `RelationalMemory` checkpoint into
`RelationalMemoryCell`.

Sonnet 1 names a module's variables by the order in which the modules are
constructed inside the `relational_memory` scope. The reference constructs:
the input projection (`linear`), then for each block b = 0, 1, … its qkv
projection (`linear_{b+1}`) and its three layer norms (`layer_norm_{3b}`
after the qkv projection, `layer_norm_{3b+1}` after the attention,
`layer_norm_{3b+2}` after the MLP; index 0 has no suffix), the MLP shared by
the blocks (`mlp/linear_0`, `mlp/linear_1`, …), and the gates' projections
of the input (`linear_{B+1}`) and of the memory (`linear_{B+2}`), B being
the number of blocks. Linear layers hold `w` (in, out) and `b`, layer norms
`gamma` and `beta`: the same layouts as Keras' `Dense` and
`LayerNormalization`, and the qkv columns are laid out per head as
[q, k, v] in both, so every array loads as it is.

| Sonnet 1 variable                          | RelationalMemoryCell weight      |
|--------------------------------------------|----------------------------------|
| relational_memory/linear/{w,b}             | input_projection/{kernel,bias}   |
| relational_memory/linear_{b+1}/{w,b}       | block_{b}_qkv/{kernel,bias}      |
| relational_memory/layer_norm_{3b}/{gamma,beta}   | block_{b}_qkv_norm         |
| relational_memory/layer_norm_{3b+1}/{gamma,beta} | block_{b}_attention_norm   |
| relational_memory/layer_norm_{3b+2}/{gamma,beta} | block_{b}_mlp_norm         |
| relational_memory/mlp/linear_{k}/{w,b}     | mlp_{k}/{kernel,bias}            |
| relational_memory/linear_{B+1}/{w,b}       | gate_input/{kernel,bias}         |
| relational_memory/linear_{B+2}/{w,b}       | gate_memory/{kernel,bias}        |
"""

import numpy as np

from keras_relrec.migrate.state_dict import assign
from keras_relrec.migrate.state_dict import take

SOURCE = "Sonnet"


def _suffixed(name, index):
    return name if index == 0 else f"{name}_{index}"


def sonnet_variable_names(cell, scope="relational_memory"):
    """{Sonnet variable name: the cell's variable} for a built cell."""
    pairs = [("linear", cell.input_projection)]
    for b, block in enumerate(cell.blocks):
        pairs += [
            (_suffixed("linear", b + 1), block.qkv),
            (_suffixed("layer_norm", 3 * b), block.qkv_norm),
            (_suffixed("layer_norm", 3 * b + 1), block.attention_norm),
            (_suffixed("layer_norm", 3 * b + 2), block.mlp_norm),
        ]
    pairs += [(f"mlp/linear_{k}", layer) for k, layer in enumerate(cell.mlp)]
    if cell.gate_style is not None:
        pairs += [
            (_suffixed("linear", cell.num_blocks + 1), cell.gate_input),
            (_suffixed("linear", cell.num_blocks + 2), cell.gate_memory),
        ]
    names = {}
    for module, layer in pairs:
        if module.startswith(("linear", "mlp")):
            names[f"{scope}/{module}/w"] = layer.kernel
            names[f"{scope}/{module}/b"] = layer.bias
        else:
            names[f"{scope}/{module}/gamma"] = layer.gamma
            names[f"{scope}/{module}/beta"] = layer.beta
    return names


def load_sonnet_relational_memory(cell, variables, scope="relational_memory"):
    """Assigns Sonnet 1 `RelationalMemory` variables to `cell`.

    Args:
        cell: A `RelationalMemoryCell` with the reference's configuration.
            If it is not built yet, it is built for the input width of the
            checkpoint's input projection.
        variables: {name: array}, names as in the checkpoint
            (`relational_memory/linear/w`) or as TF variable names
            (`relational_memory/linear/w:0`); extra names of other modules
            outside `scope` are ignored.
        scope: The module's name in the checkpoint.

    Raises:
        ValueError: a variable is missing or unexpected, or one has the
            wrong shape, is not numbers or holds a NaN or inf; the cell's
            weights are then left as they were.
    """
    arrays = {name.removesuffix(":0"): np.asarray(v) for name, v in variables.items()}
    arrays = {name: v for name, v in arrays.items() if name.startswith(scope + "/")}
    if not cell.built:
        kernel = arrays.get(f"{scope}/linear/w")
        if kernel is None or kernel.ndim != 2:
            raise ValueError(
                f"Argument `variables` key '{scope}/linear/w' holds "
                f"{'nothing' if kernel is None else f'shape {kernel.shape}'}; "
                "expected the (input width, units) kernel to build the cell from."
            )
        rows = () if cell.input_rows is None else (cell.input_rows,)
        cell.build((None,) + rows + (kernel.shape[0],))
    targets = sonnet_variable_names(cell, scope)
    missing = sorted(set(targets) - set(arrays))
    unexpected = sorted(set(arrays) - set(targets))
    if missing or unexpected:
        raise ValueError(
            "Argument `variables` does not match the cell's configuration: "
            f"missing keys {missing}, unexpected keys {unexpected}."
        )
    # The names were matched above; `take` checks each array's shape, dtype and values.
    assign([(variable, take(arrays, name, variable.shape, set(), SOURCE, argument="variables"))
            for name, variable in targets.items()])
    return cell


def read_sonnet_checkpoint(path, scope="relational_memory"):
    """{name: array} of the variables under `scope` in a TF checkpoint (the
    prefix path, e.g. `model.ckpt-1000`). Needs TensorFlow."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(path))
    return {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if name.startswith(scope + "/")
    }


def load_sonnet_checkpoint(cell, path, scope="relational_memory"):
    """Reads a Sonnet 1 checkpoint and loads it into `cell`."""
    return load_sonnet_relational_memory(cell, read_sonnet_checkpoint(path, scope), scope)
