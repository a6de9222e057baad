"""Names for the input and output tensors of a `.tflite` file that say what
they are, for runtimes that address tensors without signatures.

The converter names a signature's tensors after the traced function
(`serve_sequence:0`, `StatefulPartitionedCall:0`); `named` renames each to
`<signature>/<name>` (`step/sequence`, `step/output`, `step/<layer>_state_0`),
the names the signature gives them. One tensor that is two outputs (a
step's output that is also its first state) takes the first name of the
signature's order.
"""

import flatbuffers
from ai_edge_litert import schema_py_generated as schema

# The converter aligns constant buffers to 16 bytes (schema: force_align);
# kernels may read weights in place, so the rewrite keeps that alignment.
BUFFER_ALIGNMENT = 16


class _AlignedBuilder(flatbuffers.Builder):
    def StartVector(self, elemSize, numElems, alignment):  # noqa: N802, N803 (flatbuffers' names)
        if elemSize == 1:
            alignment = max(alignment, BUFFER_ALIGNMENT)
        return super().StartVector(elemSize, numElems, alignment)


def named(content):
    """The file's bytes with every signature tensor named
    `<signature>/<name>`."""
    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    for signature in model.signatureDefs or []:
        key = signature.signatureKey.decode()
        tensors = model.subgraphs[signature.subgraphIndex].tensors
        renamed = set()
        for tensor_map in (signature.inputs or []) + (signature.outputs or []):
            if tensor_map.tensorIndex not in renamed:
                tensors[tensor_map.tensorIndex].name = f"{key}/{tensor_map.name.decode()}".encode()
                renamed.add(tensor_map.tensorIndex)
    builder = _AlignedBuilder(len(content) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
