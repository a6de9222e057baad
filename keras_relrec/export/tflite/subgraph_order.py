"""The subgraph that does the work first in the file, where LiteRT's
default delegate (XNNPACK) takes it.

The converter orders a file's signatures by name, so a streaming file of a
layer that steps by chunks (`SegmentRecurrence`: Transformer-XL, the
segment cache) starts with `chunk_length` (no input, one int32 constant
out, no op), then `initial_state`, then `step`. In such a file LiteRT
(ai-edge-litert 2.3.0, default options) applies its default XNNPACK
delegate to no subgraph, silently: `step` runs on the reference kernels.
For Transformer-XL (6 layers, d = 256, memory 2,048, batch 1) that made
the step 3 to 4 times slower than the same subgraph taken by XNNPACK; the
same file with `step` first, or without `chunk_length`, is delegated
(`initial_state` first is too). `step_first` moves `step` (or `serve`)
to the front and renumbers every reference to a subgraph: the signatures'
and those of the control-flow ops (WHILE's body and condition, IF's
branches, and the others the schema has). Every subgraph's content stays
as it is.
"""

from keras_relrec.export.tflite import flatbuffer

# The signatures that should lead, in that order: what runs per frame or
# per sequence.
LEADING = ("step", "serve")

# Fields of the builtin options (`builtinOptions` and `builtinOptions2`)
# that hold a subgraph's index, or a list of them.
_SUBGRAPH_FIELDS = (
    "bodySubgraphIndex", "condSubgraphIndex", "thenSubgraphIndex", "elseSubgraphIndex", "initSubgraphIndex",
    "subgraph", "decompositionSubgraphIndex", "comparatorSubgraphIndex", "updateComputationSubgraphIndex",
    "branchSubgraphIndices",
)


def order(model):
    """The subgraph indices in their new order: the subgraphs of the
    `LEADING` signatures first, then every other one as it was."""
    signatures = {s.signatureKey.decode(): s.subgraphIndex for s in model.signatureDefs or []}
    leading = [signatures[key] for key in LEADING if key in signatures]
    return leading + [k for k in range(len(model.subgraphs)) if k not in leading]


def first_subgraph(content):
    """The name of the file's first subgraph (LiteRT's primary one)."""
    model = flatbuffer.read(content)
    name = model.subgraphs[0].name
    return None if name is None else name.decode()


def step_first(content):
    """The file with the subgraph of `step` (else `serve`) first, every
    index to a subgraph renumbered; `content` itself where that subgraph
    already leads."""
    model = flatbuffer.read(content)
    new_order = order(model)
    if new_order == sorted(new_order):
        return content
    new_index = {old: new for new, old in enumerate(new_order)}
    model.subgraphs = [model.subgraphs[old] for old in new_order]
    for signature in model.signatureDefs or []:
        signature.subgraphIndex = new_index[signature.subgraphIndex]
    for subgraph in model.subgraphs:
        for op in subgraph.operators or []:
            for options in (op.builtinOptions, getattr(op, "builtinOptions2", None)):
                _renumber(options, new_index)
    return flatbuffer.write(model, len(content))


def _renumber(options, new_index):
    if options is None:
        return
    for field in _SUBGRAPH_FIELDS:
        value = getattr(options, field, None)
        if value is None:
            continue
        if field.endswith("Indices"):
            setattr(options, field, [new_index[int(k)] for k in value])
        else:
            setattr(options, field, new_index[int(value)])
