"""The contract registry: one entry per public layer or cell.

Every entry is held to every check of the contract (one module per property,
listed in `conformance.py`). A new public layer joins by adding one `Entry`
here (and its golden arrays: tests/goldens/make_backend_goldens.py);
`test_every_public_layer_has_an_entry` fails until it does.
"""

import dataclasses

import keras
import numpy as np

from keras_relrec import layers


def cell_config(cell):
    """A cell's serialized config without its dtype policy: the cell each
    entry makes from it takes the policy in force then, as a cell written
    in the code would (the config would pin the policy of import time)."""
    config = keras.saving.serialize_keras_object(cell)
    config["config"].pop("dtype", None)
    return config


@dataclasses.dataclass
class Entry:
    """A public layer or cell, a small configuration and its input.

    cls: the public class.
    kwargs: a small constructor configuration.
    input_shape: one example's shape (no batch axis); a list of shapes for
        a layer of several inputs (the checks vary the first, and read a
        list of outputs).
    is_cell: whether `cls` is a cell to be wrapped in `keras.layers.RNN`.
    recurrent: whether the layer (or the RNN around the cell) takes the RNN
        arguments (`return_state`, `stateful`, `go_backwards`, masking).
    bad_kwargs: constructor overrides that must raise `ValueError`, each with
        the argument name the message must contain.
    dropout_kwargs: the seed and rates of dropout, for recurrent entries
        that have dropout; the checks switch the input and the recurrent
        rate on one at a time.
    bad_rank_match: what the error for an input of the wrong rank says.
    other_ranks: ranks (batch included) besides the input's that the layer
        also takes, e.g. feature maps beside sequences.
    fixed_length: whether the built layer holds to its number of steps.
    fixed_axis: the input axis (of one example, counting the batch) whose
        size the built layer holds to; the checks change it and expect a
        `ValueError`; None: the built layer holds to none (token ids).
    takes_mask: for a layer that is not recurrent, whether it reads a
        (batch, steps) mask; the checks make sure masked steps change
        nothing.
    consumes_mask: whether a layer that takes a mask and keeps the rank
        of its input (a (batch, steps', features') output) ends the mask
        there, as a map over time does, instead of passing it on.
    variant: names a second entry of the same class.
    vocabulary_size: for a layer that also embeds token ids, a vocabulary
        size with which `kwargs` make it take (batch, steps) ids
        (`test_token_ids.py`); 0 for the others.
    input_dtype: the dtype of the (first) input; for "int32", token ids
        in 0 … vocabulary_size − 1 (a layer that takes nothing else).
    scores_tokens: whether the layer's outputs are scores over a
        vocabulary (it has a `vocabulary_size` but takes no token ids).
    """

    cls: type
    kwargs: dict
    input_shape: tuple
    is_cell: bool = False
    recurrent: bool = False
    bad_kwargs: list = dataclasses.field(default_factory=list)
    dropout_kwargs: dict = dataclasses.field(default_factory=dict)
    bad_rank_match: str = "expected"
    other_ranks: tuple = ()
    fixed_length: bool = False
    fixed_axis: int | None = -1
    takes_mask: bool = False
    consumes_mask: bool = False
    variant: str = ""
    vocabulary_size: int = 0
    input_dtype: str = "float32"
    scores_tokens: bool = False

    @property
    def id(self):
        """Unique among the entries: a second entry of a class names its
        variant."""
        return self.cls.__name__ + (f"-{self.variant}" if self.variant else "")

    @property
    def input_shapes(self):
        return list(self.input_shape) if isinstance(self.input_shape, list) else [self.input_shape]

    @property
    def input_names(self):
        """`sequence` for the first input (the export's checks name it)."""
        return ["sequence"] + [f"input_{k}" for k in range(1, len(self.input_shapes))]

    def structured(self, values):
        """One value per input, as the layer takes them: alone or a list."""
        return list(values) if isinstance(self.input_shape, list) else values[0]

    def make_inputs(self, dynamic_length=False, names=True):
        """The model's `keras.Input`s; with `dynamic_length` they take any
        number of time steps."""
        return [
            keras.Input(((None,) + shape[1:]) if dynamic_length else shape, name=name if names else None,
                        dtype=self.input_dtype if k == 0 else "float32")
            for k, (shape, name) in enumerate(zip(self.input_shapes, self.input_names))
        ]

    def make_layer(self, **overrides):
        """The layer under test: a cell wrapped in `RNN`, or the layer itself.

        `overrides` with RNN arguments (`return_state`, `stateful`, ...) go to
        the RNN for a cell, to the layer otherwise.
        """
        rnn_args = {
            k: overrides.pop(k)
            for k in ("return_sequences", "return_state", "stateful", "go_backwards")
            if k in overrides
        }
        if self.is_cell:
            cell = self.cls(**{**self.kwargs, **overrides})
            rnn_args.setdefault("return_sequences", True)
            return keras.layers.RNN(cell, **rnn_args)
        return self.cls(**{**self.kwargs, **overrides, **rnn_args})

    def make_model(self, dynamic_length=False, **overrides):
        """A functional model of the layer alone; with `dynamic_length` its
        input takes any number of time steps."""
        inputs = self.structured(self.make_inputs(dynamic_length))
        return keras.Model(inputs, self.make_layer(**overrides)(inputs))

    def make_input(self, batch=3, seed=0, length=None):
        """Random inputs: an array, or a list of arrays for several inputs
        (each `length` steps long, when given)."""
        rng = np.random.default_rng(seed)
        shapes = [(batch,) + (shape if length is None else (length,) + shape[1:]) for shape in self.input_shapes]
        values = [rng.normal(size=shape).astype("float32") for shape in shapes]
        if self.input_dtype == "int32":
            values[0] = rng.integers(0, self.vocabulary_size, size=shapes[0]).astype("int32")
        return self.structured(values)


LSTM_BAD_KWARGS = [
    ({"units": 0}, "units"),
    ({"units": 2.5}, "units"),
    ({"dropout": 1.5}, "dropout"),
    ({"recurrent_dropout": -0.1}, "recurrent_dropout"),
    ({"use_bias": 1}, "use_bias"),
    ({"seed": "one"}, "seed"),
    ({"cell_clip": 0.0}, "cell_clip"),
    ({"cell_clip": "3"}, "cell_clip"),
]

ENTRIES = [
    Entry(
        layers.BoFQuantizer,
        {"num_codewords": 5},
        (6, 3),
        bad_kwargs=[
            ({"num_codewords": 0}, "num_codewords"),
            ({"scale": "global"}, "scale"),
            ({"distance": "l1"}, "distance"),
            ({"output_mode": "counts"}, "output_mode"),
            ({"initial_scale": 0.0}, "initial_scale"),
            ({"epsilon": -1e-3}, "epsilon"),
        ],
        bad_rank_match=r"expects sequences \(batch, steps, features\)",
        takes_mask=True,
        other_ranks=(4,),
    ),
    Entry(
        layers.BoFQuantizer,
        # The histogram over the valid steps of a sequence.
        {"num_codewords": 5, "output_mode": "histogram"},
        (6, 3),
        variant="histogram",
        bad_rank_match=r"expects sequences \(batch, steps, features\)",
        takes_mask=True,
        other_ranks=(4,),
    ),
    Entry(
        layers.BoFQuantizer,
        # Histograms of three segments of two steps each.
        {"num_codewords": 5, "output_mode": "segment_histograms", "num_segments": 3},
        (6, 3),
        variant="segment-histograms",
        bad_kwargs=[
            ({"num_segments": 0}, "num_segments"),
            ({"num_segments": None}, "num_segments"),
            ({"output_mode": "histogram"}, "num_segments"),
        ],
        bad_rank_match=r"expects sequences \(batch, steps, features\)",
        takes_mask=True,
        consumes_mask=True,
    ),
    Entry(
        layers.SegmentMean,
        {"num_segments": 4},
        (6, 3),
        bad_kwargs=[({"num_segments": 0}, "num_segments"), ({"num_segments": 2.0}, "num_segments")],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
        consumes_mask=True,
    ),
    Entry(
        layers.SeriesNormalization,
        {},
        (6, 3),
        bad_kwargs=[({"epsilon": 0.0}, "epsilon"), ({"epsilon": "x"}, "epsilon")],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.SeriesStatistics,
        # A reference per feature, so that the features differ.
        {"mean": [0.5, -1.0, 0.0], "variance": [4.0, 0.25, 1.0]},
        (6, 3),
        bad_kwargs=[({"variance": 0.0}, "variance"), ({"mean": float("nan")}, "mean"),
                    ({"epsilon": 0.0}, "epsilon"), ({"per_step": 1}, "per_step")],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.SeriesStatistics,
        # Repeated at every step, the mask passed on.
        {"mean": 0.5, "variance": 4.0, "per_step": True},
        (6, 3),
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
        variant="per-step",
    ),
    Entry(
        layers.BoFQuantizer,
        # The histogram of feature maps, with the other similarity.
        {"num_codewords": 5, "output_mode": "histogram", "scale": "per_codeword",
         "distance": "squared_l2"},
        (4, 4, 3),
        variant="histogram-of-maps",
        bad_rank_match=r"expects sequences \(batch, steps, features\)",
        other_ranks=(3,),
    ),
    Entry(
        layers.TwoDAttention,
        # Random W, so the attention is not uniform and W gets gradients.
        {"axis": 1, "kernel_initializer": "random_normal", "initial_tau": 0.7},
        (6, 3),
        bad_kwargs=[
            ({"axis": 0}, "axis"),
            ({"axis": 3}, "axis"),
            ({"axis": True}, "axis"),
            ({"axis": 1.0}, "axis"),
            ({"initial_tau": 1.5}, "initial_tau"),
            ({"trainable_tau": 1}, "trainable_tau"),
        ],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        fixed_axis=1,
        takes_mask=True,
        fixed_length=True,
    ),
    Entry(
        layers.TwoDAttention,
        # The parameter-efficient W = 1/L + U Vᵀ, random so W gets gradients.
        {"axis": 1, "rank": 2, "kernel_initializer": "random_normal"},
        (6, 3),
        variant="low-rank",
        bad_kwargs=[({"rank": 0}, "rank")],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        fixed_axis=1,
        takes_mask=True,
        fixed_length=True,
    ),
    Entry(
        layers.LocalFeatures,
        {"window_size": 3, "filters": 4, "bias_initializer": "random_normal"},
        (6, 3),
        bad_kwargs=[
            ({"mode": "patches"}, "mode"),
            ({"window_size": 0}, "window_size"),
            ({"filters": 0}, "filters"),
            ({"strides": 4}, "strides"),
            ({"mode": "window", "filters": 4}, "filters"),
        ],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.LocalFeatures,
        # Sub-sequences, every second one.
        {"mode": "window", "window_size": 3, "strides": 2},
        (6, 3),
        variant="windows",
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
    ),
    Entry(
        layers.LocalFeatures,
        # MiniRocket's kernels at dilations 1 and 2 (strides: the equations'
        # test).
        {"mode": "kernels", "window_size": 17},
        (7, 2),
        variant="kernels",
        bad_kwargs=[({"window_size": 8}, "window_size"), ({"filters": 4}, "filters"),
                    ({"dilations": (4,)}, "dilations")],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.TwoDAttention,
        {"axis": 2, "kernel_initializer": "random_normal"},
        (6, 3),
        variant="features",
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.BilinearLayer,
        {"units": 4, "steps": 2, "activation": "tanh", "bias_initializer": "random_normal"},
        (5, 3),
        bad_kwargs=[
            ({"units": 0}, "units"),
            ({"steps": 1.5}, "steps"),
            ({"data_format": "NCT"}, "data_format"),
            ({"squeeze": True}, "squeeze"),
            ({"use_bias": "yes"}, "use_bias"),
        ],
        bad_rank_match=r"expects inputs \(batch, time, features\)",
        fixed_length=True,
        takes_mask=True,
        consumes_mask=True,
    ),
    Entry(
        layers.TABL,
        {"units": 4, "steps": 2, "attention_initializer": "random_normal",
         "initial_lambda": 0.6, "bias_initializer": "random_normal"},
        (5, 3),
        bad_kwargs=[
            ({"attend_over": "channels"}, "attend_over"),
            ({"initial_lambda": -0.1}, "initial_lambda"),
            ({"units": -2}, "units"),
        ],
        bad_rank_match=r"expects inputs \(batch, time, features\)",
        fixed_length=True,
        takes_mask=True,
        consumes_mask=True,
    ),
    Entry(
        layers.TABL,
        # The paper's layout, attention over features, a squeezed last layer.
        {"units": 3, "steps": 1, "attend_over": "features", "data_format": "channels_first",
         "squeeze": True, "activation": "softmax", "attention_initializer": "random_normal"},
        (4, 5),
        variant="features-channels-first",
        bad_rank_match=r"expects inputs \(batch, features, time\)",
        fixed_length=True,
    ),
    Entry(
        layers.RecurrentBoFCell,
        # Two groups of three features, each its own sequence of states (as
        # the recurrent NBoF reads its dilations); one group is the plain
        # cell, whose equations tests/layers check on their own.
        {"num_codewords": 4, "groups": 2, "bias_initializer": "random_normal"},
        (5, 6),
        is_cell=True,
        recurrent=True,
        bad_kwargs=[
            ({"num_codewords": 2.0}, "num_codewords"),
            ({"distance": "cosine"}, "distance"),
            ({"initial_scale": -1.0}, "initial_scale"),
            ({"groups": 0}, "groups"),
        ],
        bad_rank_match=r"steps of shape \(batch, features\)",
    ),
    Entry(
        layers.RelationalMemoryCell,
        # Two blocks, two heads, a key size apart from the head size and
        # random biases, so that every weight shapes the output.
        {
            "mem_slots": 3,
            "head_size": 4,
            "num_heads": 2,
            "num_blocks": 2,
            "key_size": 3,
            "bias_initializer": "random_normal",
        },
        (5, 3),
        is_cell=True,
        recurrent=True,
        bad_kwargs=[
            ({"mem_slots": 0}, "mem_slots"),
            ({"head_size": -1}, "head_size"),
            ({"num_blocks": 1.5}, "num_blocks"),
            ({"gate_style": "both"}, "gate_style"),
            ({"forget_bias": "high"}, "forget_bias"),
            ({"key_size": 0}, "key_size"),
            ({"input_rows": 0}, "input_rows"),
        ],
        bad_rank_match=r"steps of shape \(batch, features\)",
    ),
    Entry(
        layers.PeepholeLSTMCell,
        {"units": 4},
        (5, 3),
        is_cell=True,
        recurrent=True,
        bad_kwargs=LSTM_BAD_KWARGS + [({"use_peepholes": False}, "use_peepholes")],
        dropout_kwargs={"dropout": 0.3, "recurrent_dropout": 0.3, "seed": 1},
        bad_rank_match=r"sequences of shape \(batch, time, features\)",
    ),
    Entry(
        layers.CoupledLSTMCell,
        {"units": 4, "use_peepholes": True},
        (5, 3),
        is_cell=True,
        recurrent=True,
        bad_kwargs=LSTM_BAD_KWARGS + [({"use_peepholes": "yes"}, "use_peepholes")],
        dropout_kwargs={"dropout": 0.3, "recurrent_dropout": 0.3, "seed": 1},
        bad_rank_match=r"sequences of shape \(batch, time, features\)",
    ),
    Entry(
        layers.PeepholeConvLSTM2D,
        # Random peepholes: with the default zeros, every comparison below
        # would pass whether or not the peepholes were saved or applied.
        {
            "filters": 2,
            "kernel_size": 3,
            "padding": "same",
            "return_sequences": True,
            "peephole_initializer": "random_normal",
        },
        (4, 5, 5, 2),
        recurrent=True,
        bad_kwargs=[
            ({"filters": 0}, "filters"),
            ({"dropout": 2.0}, "dropout"),
            ({"use_peepholes": 1}, "use_peepholes"),
            ({"kernel_size": (3, 3, 3)}, "kernel_size"),
            ({"use_bias": "no"}, "use_bias"),
            ({"seed": 1.5}, "seed"),
        ],
        dropout_kwargs={"dropout": 0.3, "recurrent_dropout": 0.3, "seed": 1},
        bad_rank_match="expected ndim=5",
    ),
    Entry(
        layers.PeepholeConvLSTM2D,
        # Shi et al.'s layout, (batch, time, channels, rows, cols), with a
        # stride: TensorFlow has no portable NCHW convolution on CPUs.
        {
            "filters": 2,
            "kernel_size": 3,
            "strides": 2,
            "data_format": "channels_first",
            "return_sequences": True,
            "peephole_initializer": "random_normal",
        },
        (4, 2, 5, 5),
        recurrent=True,
        variant="channels-first",
        bad_rank_match="expected ndim=5",
        fixed_axis=2,
    ),
    Entry(
        layers.RelativeMultiHeadAttention,
        {"num_heads": 2, "head_size": 3, "clamp_len": 4},
        (6, 4),
        bad_kwargs=[
            ({"num_heads": 0}, "num_heads"),
            ({"head_size": 1.5}, "head_size"),
            ({"clamp_len": 0}, "clamp_len"),
            ({"same_length": 1}, "same_length"),
            ({"attention_dropout": 1.0}, "attention_dropout"),
            ({"epsilon": 0.0}, "epsilon"),
        ],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.TransformerXLBlock,
        {"num_heads": 2, "head_size": 3, "intermediate_dim": 5, "pre_lnorm": True,
         "bias_initializer": "random_normal"},
        (6, 4),
        bad_kwargs=[
            ({"intermediate_dim": 0}, "intermediate_dim"),
            ({"pre_lnorm": "yes"}, "pre_lnorm"),
            ({"dropout": -0.5}, "dropout"),
        ],
        bad_rank_match=r"expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.AdaptiveEmbedding,
        # Three clusters of widths 4, 2, 1, each projected to 4.
        {"vocabulary_size": 12, "output_dim": 4, "cutoffs": [4, 8], "div_val": 2},
        (6,),
        bad_kwargs=[
            ({"vocabulary_size": 0}, "vocabulary_size"),
            ({"output_dim": 0}, "output_dim"),
            ({"cutoffs": [8, 4]}, "cutoffs"),
            ({"div_val": 3}, "div_val"),
            ({"embedding_dim": -1}, "embedding_dim"),
        ],
        bad_rank_match=r"AdaptiveEmbedding expects token ids \(batch, steps\)",
        fixed_axis=None,
        vocabulary_size=12,
        input_dtype="int32",
    ),
    Entry(
        layers.AdaptiveSoftmax,
        # A head of four tokens and two clusters, projected from 6 to widths 4 and 2.
        {"vocabulary_size": 12, "cutoffs": [4, 8], "div_val": 2, "embedding_dim": 4,
         "bias_initializer": "random_normal"},
        (5, 6),
        bad_kwargs=[
            ({"vocabulary_size": 4}, "cutoffs"),
            ({"div_val": 8}, "div_val"),
            ({"tie_projections": True}, "tie_projections"),
            ({"tied_embedding": "embedding"}, "tied_embedding"),
        ],
        bad_rank_match=r"AdaptiveSoftmax expects inputs \(batch, steps, d\)",
        scores_tokens=True,
    ),
    Entry(
        layers.TransformerXL,
        # Eight steps in segments of three: the last one is padded inside.
        {"num_layers": 2, "num_heads": 2, "head_size": 3, "hidden_dim": 4, "intermediate_dim": 5,
         "segment_len": 3, "mem_len": 4, "bias_initializer": "random_normal"},
        (8, 4),
        bad_kwargs=[
            ({"num_layers": 0}, "num_layers"),
            ({"hidden_dim": 3}, "hidden_dim"),
            ({"segment_len": 2.0}, "segment_len"),
            ({"segment_len": 0}, "segment_len"),
            ({"mem_len": -1}, "mem_len"),
            ({"same_length": True, "mem_len": 0}, "same_length"),
            ({"clamp_len": 0}, "clamp_len"),
            ({"vocabulary_size": 0}, "vocabulary_size"),
            ({"tie_relative_biases": None}, "tie_relative_biases"),
            ({"stateful": 1}, "stateful"),
        ],
        bad_rank_match=r"TransformerXL expects inputs \(batch, steps, 4\)",
        takes_mask=True,
        vocabulary_size=5,
    ),
    Entry(
        layers.SegmentCacheTransformer,
        # Four segments of three through two slots: evictions and a recall
        # of one; the causal query and the dense summary (the defaults).
        # One layer: segments are unrolled, so each layer more lengthens
        # every check; the per-layer states of two are checked by the
        # layer's own tests (streaming, SavedModel) and, through the same
        # segment recurrence, by TransformerXL's entry.
        {"num_layers": 1, "num_heads": 2, "head_size": 3, "hidden_dim": 4, "intermediate_dim": 5,
         "segment_len": 3, "num_slots": 2, "top_k": 1, "bias_initializer": "random_normal"},
        (12, 4),
        bad_kwargs=[
            ({"num_slots": 0}, "num_slots"),
            ({"top_k": 3}, "top_k"),
            ({"query": "future"}, "query"),
            ({"summary": "attention"}, "summary"),
            ({"relevance_weighting": "yes"}, "relevance_weighting"),
            ({"relevance_weighting": 1}, "relevance_weighting"),
            ({"hidden_dim": 5}, "hidden_dim"),
        ],
        bad_rank_match=r"SegmentCacheTransformer expects inputs \(batch, steps, 4\)",
        takes_mask=True,
        vocabulary_size=5,
    ),
    Entry(
        layers.SegmentCacheTransformer,
        # The design note's query with the BiLSTM summary; three segments, the last
        # padded, the third recalling one of two. Segments are unrolled, so
        # every one more lengthens each check of the entry.
        {"num_layers": 1, "num_heads": 2, "head_size": 3, "hidden_dim": 4, "intermediate_dim": 5,
         "segment_len": 3, "num_slots": 2, "top_k": 1, "query": "standard", "summary": "bilstm",
         "pre_lnorm": True, "bias_initializer": "random_normal"},
        (8, 4),
        variant="standard-bilstm",
        bad_rank_match=r"SegmentCacheTransformer expects inputs \(batch, steps, 4\)",
        takes_mask=True,
        vocabulary_size=5,
    ),
    Entry(
        layers.SegmentRecurrence,
        # The loop under both presets, with a policy given as its config:
        # the cache with the query the presets' entries leave out and the
        # MLP summary; three segments, the third recalling one of two.
        {"num_layers": 1, "num_heads": 2, "head_size": 3, "hidden_dim": 4, "intermediate_dim": 5,
         "segment_len": 3,
         "memory": keras.saving.serialize_keras_object(layers.SegmentCache(
             2, 1, query="compute_first", summary="mlp")),
         "bias_initializer": "random_normal"},
        (9, 4),
        bad_kwargs=[
            ({"memory": "fifo"}, "memory"),
            ({"same_length": True}, "same_length"),
            ({"segment_len": 0}, "segment_len"),
        ],
        bad_rank_match=r"SegmentRecurrence expects inputs \(batch, steps, 4\)",
        takes_mask=True,
        vocabulary_size=5,
    ),
    Entry(
        layers.SegmentSummary,
        {"units": 4, "kind": "mlp", "bias_initializer": "random_normal"},
        (5, 3),
        bad_kwargs=[
            ({"units": 0}, "units"),
            ({"kind": "max"}, "kind"),
            ({"units": 3, "kind": "bilstm"}, "units"),
            ({"num_layers": 0}, "num_layers"),
        ],
        bad_rank_match=r"SegmentSummary expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.LocalRecurrence,
        # Keras' GRU over windows of 3, given as a cell's config (each entry
        # makes a fresh cell, in the dtype policy in force).
        {"cell": cell_config(keras.layers.GRUCell(4, bias_initializer="random_normal")),
         "window_size": 3},
        (7, 3),
        bad_kwargs=[
            ({"window_size": 0}, "window_size"),
            ({"window_size": 2.5}, "window_size"),
            ({"chunk_size": 0}, "chunk_size"),
            ({"stateful": "yes"}, "stateful"),
            ({"cell": keras.layers.Dense(4)}, "cell"),
        ],
        bad_rank_match=r"LocalRecurrence expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.LocalRecurrence,
        # A cell of the package over windows of 4, three positions at a time
        # (the last chunk padded).
        {"cell": cell_config(layers.PeepholeLSTMCell(4)), "window_size": 4,
         "chunk_size": 3},
        (8, 3),
        variant="chunked-peephole",
        bad_rank_match=r"LocalRecurrence expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.RTransformerBlock,
        # Two local layers, causal attention of two heads, the reference norm.
        {"num_heads": 2, "window_size": 3, "num_local_layers": 2, "intermediate_dim": 6,
         "bias_initializer": "random_normal"},
        (6, 4),
        bad_kwargs=[
            ({"num_heads": 0}, "num_heads"),
            ({"window_size": -1}, "window_size"),
            ({"num_local_layers": -1}, "num_local_layers"),
            ({"cell": "tcn"}, "cell"),
            ({"norm": "rms"}, "norm"),
            ({"dropout": 1.5}, "dropout"),
            ({"epsilon": 0.0}, "epsilon"),
            ({"chunk_size": 0}, "chunk_size"),
        ],
        bad_rank_match=r"RTransformerBlock expects inputs \(batch, steps, features\)",
        takes_mask=True,
    ),
    Entry(
        layers.GlobalRelation,
        # Eq. (5) as written, two inputs of other lengths and widths.
        {"units": 3},
        [(6, 4), (5, 3)],
        bad_kwargs=[
            ({"units": 0}, "units"),
            ({"pairwise": "sum"}, "pairwise"),
        ],
        bad_rank_match=r"GlobalRelation expects two inputs \[A, B\]",
        takes_mask=True,
    ),
    Entry(
        layers.RegionalRelation,
        # Two regions of an equal split; a hidden layer on each pair.
        {"units": 3, "regions": 2, "pairwise": "concat_relu"},
        [(6, 4), (5, 3)],
        bad_kwargs=[
            ({"units": -1}, "units"),
            ({"regions": 0}, "regions"),
            ({"regions": ([0, 1], [0, 0])}, "regions"),
            ({"pairwise": "cosine"}, "pairwise"),
        ],
        bad_rank_match=r"RegionalRelation expects two inputs \[A, B\]",
        takes_mask=True,
    ),
    Entry(
        layers.InteractionTransformer,
        # Local recurrence over the maps (its own width), fusion by
        # concatenation, the dot form: every weight shapes the outputs.
        {"relation_units": 3, "regions": 2, "fusion": "concat", "pairwise": "dot", "map_window_size": 2,
         "map_units": 3, "bias_initializer": "random_normal"},
        [(6, 4), (5, 4)],
        bad_kwargs=[
            ({"relation_units": 0}, "relation_units"),
            ({"regions": -2}, "regions"),
            ({"fusion": "mean"}, "fusion"),
            ({"pairwise": "outer"}, "pairwise"),
            ({"transform_units": 1.5}, "transform_units"),
            ({"map_window_size": 0}, "map_window_size"),
            ({"map_units": 0}, "map_units"),
            ({"confine_regional_maps": "false"}, "confine_regional_maps"),
        ],
        bad_rank_match=r"InteractionTransformer expects two inputs \[A, B\]",
        takes_mask=True,
        fixed_length=True,
    ),
]

RECURRENT_ENTRIES = [e for e in ENTRIES if e.recurrent]
MASK_ENTRIES = [e for e in ENTRIES if e.takes_mask]
DROPOUT_ENTRIES = [e for e in RECURRENT_ENTRIES if e.dropout_kwargs]
# Layers that stream through the export's protocol on their own.
PROTOCOL_ENTRIES = [e for e in ENTRIES if hasattr(e.cls, "streaming_step")]
