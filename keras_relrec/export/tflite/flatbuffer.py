"""Reading a `.tflite` file into LiteRT's object API and writing it back:
the one place the passes over a finished file (`tensor_names`,
`static_reshapes`) unpack and pack flatbuffers."""

import flatbuffers
from ai_edge_litert import schema_py_generated as schema

# The converter aligns constant buffers to 16 bytes (schema: force_align);
# kernels may read weights in place, so a rewrite keeps that alignment.
BUFFER_ALIGNMENT = 16


class _AlignedBuilder(flatbuffers.Builder):
    def StartVector(self, elemSize, numElems, alignment):  # noqa: N802, N803 (flatbuffers' names)
        if elemSize == 1:
            alignment = max(alignment, BUFFER_ALIGNMENT)
        return super().StartVector(elemSize, numElems, alignment)


def read(content):
    """The file's bytes as a mutable `schema.ModelT`."""
    return schema.ModelT.InitFromPackedBuf(bytearray(content), 0)


def write(model, size_hint=0):
    """A `schema.ModelT` as the bytes of a `.tflite` file."""
    builder = _AlignedBuilder(size_hint + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
