"""Names for the input and output tensors of a `.tflite` file that say what
they are, for runtimes that address tensors without signatures.

The converter names a signature's tensors after the traced function
(`serve_sequence:0`, `StatefulPartitionedCall:0`); `named` renames each to
`<signature>/<name>` (`step/sequence`, `step/output`, `step/<layer>_state_0`),
the names the signature gives them. One tensor that is two outputs (a
step's output that is also its first state) takes the first name of the
signature's order.
"""

from keras_relrec.export.tflite import flatbuffer


def named(content):
    """The file's bytes with every signature tensor named
    `<signature>/<name>`."""
    model = flatbuffer.read(content)
    for signature in model.signatureDefs or []:
        key = signature.signatureKey.decode()
        tensors = model.subgraphs[signature.subgraphIndex].tensors
        renamed = set()
        for tensor_map in (signature.inputs or []) + (signature.outputs or []):
            if tensor_map.tensorIndex not in renamed:
                tensors[tensor_map.tensorIndex].name = f"{key}/{tensor_map.name.decode()}".encode()
                renamed.add(tensor_map.tensorIndex)
    return flatbuffer.write(model, len(content))
