"""Adaptive input embeddings: narrower vectors for rarer tokens."""

import math

import keras
from keras import ops

from keras_relrec.layers.adaptive.clusters import Clusters
from keras_relrec.layers.adaptive.clusters import ClusterSettings
from keras_relrec.ops import lookup_rows
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer


@register_layer
class AdaptiveEmbedding(ClusterSettings, keras.layers.Layer):
    """Adaptive input embeddings: the vocabulary cut into clusters by
    frequency, each with vectors of its own width, projected to one output
    width and scaled.

    Baevski and Auli, "Adaptive input representations for neural language
    modeling", ICLR 2019, in the form of Dai et al.'s Transformer-XL code.
    With the clusters [l_i, r_i) of `cutoffs` (ids ranked by frequency:
    cluster 0 the most frequent), cluster widths d_i = d_e // div_val^i, a
    table E_i (r_i − l_i, d_i) and a projection K_i (d_i, d) per cluster:

    ```
    e(x) = sqrt(d) · E_i[x − l_i] K_i     for x in [l_i, r_i)
    ```

    With div_val = 1 there is one table (vocabulary_size, d_e) for every
    cluster and one projection, only where d_e ≠ d (then e(x) =
    sqrt(d) · E[x] K, or sqrt(d) · E[x]): the cutoffs only matter to an
    `AdaptiveSoftmax` tied to it. `SegmentRecurrence` and `TransformerXL`
    take it as their `embedding`; an `AdaptiveSoftmax` can share its tables
    and projections (`tied_embedding`).

    Args:
        vocabulary_size: Number of token ids.
        output_dim: d, the width of the embeddings (the model's width).
        cutoffs: Increasing ids where the clusters after the first start,
            e.g. [20000, 40000, 200000]; [] (default): one cluster.
        div_val: Each cluster's width is that of the one before divided by
            it; 1 (default): one width.
        embedding_dim: d_e, the width of the first cluster; default d.
        embeddings_initializer: Of the tables; default normal with standard
            deviation 0.02 (Transformer-XL's).
        projection_initializer: Of the projections; default normal with
            standard deviation 0.01 (Transformer-XL's).
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: Integer token ids (batch, steps) in 0 … vocabulary_size − 1:
            an eager call refuses others with a `ValueError`; under a trace
            they are assumed valid (an id outside embeds as zeros with
            div_val > 1, as Transformer-XL's code).

    Returns:
        (batch, steps, output_dim).

    Example:

    >>> import numpy as np
    >>> from keras_relrec.layers import AdaptiveEmbedding
    >>> embedding = AdaptiveEmbedding(1000, 16, cutoffs=[100, 500], div_val=2)
    >>> tuple(embedding(np.array([[1, 200, 999]])).shape)
    (1, 3, 16)
    """

    # Each position's vector is its own token's (see StreamingLayer).
    acts_per_step = True

    def __init__(self, vocabulary_size, output_dim, cutoffs=(), div_val=1, embedding_dim=None,
                 embeddings_initializer=None, projection_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.output_dim = validation.check_positive_int("output_dim", output_dim)
        self.clusters = Clusters(vocabulary_size, cutoffs, div_val,
                                 self.output_dim if embedding_dim is None else embedding_dim)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.RandomNormal(stddev=0.02))
        self.projection_initializer = keras.initializers.get(
            projection_initializer or keras.initializers.RandomNormal(stddev=0.01))

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise ValueError(
                f"AdaptiveEmbedding expects token ids (batch, steps); received input of shape "
                f"{tuple(input_shape)}."
            )
        self.input_spec = keras.layers.InputSpec(ndim=2)
        clusters = self.clusters
        projects = clusters.projects(self.output_dim)

        def weight(base, i, shape, initializer):
            name = clusters.weight_name(base, i)
            return self.add_weight(name=name, shape=shape, initializer=clone_initializer(initializer, name))

        shapes = clusters.table_shapes()
        self.tables = [weight("embeddings", i, shape, self.embeddings_initializer) for i, shape in enumerate(shapes)]
        self.projections = [
            weight("projection", i, (width, self.output_dim), self.projection_initializer) if projects else None
            for i, (_, width) in enumerate(shapes)
        ]

    def cluster_weights(self, i):
        """Cluster i's table (r_i − l_i, d_i) and projection (d_i, d) or
        None, as variables or slices of them (what a tied softmax reads)."""
        return self.clusters.rows(self.tables, i), self.projections[self.clusters.table_index(i)]

    def call(self, inputs):
        validation.check_token_ids(self, inputs, self.vocabulary_size)
        ids = ops.cast(inputs, "int32")
        if self.clusters.div_val == 1:
            hidden = self._project(lookup_rows(self._read(self.tables[0]), ids), self.projections[0])
        else:
            # Each position's rows are zeros but in its own cluster.
            parts = [self._project(lookup_rows(self._read(table), ids - left, outside_zero=True), projection)
                     for (left, _), table, projection in zip(self.clusters.bounds, self.tables, self.projections)]
            hidden = sum(parts[1:], parts[0])
        # sqrt(d) as a Python number: it takes the embedding's dtype.
        return hidden * math.sqrt(self.output_dim)

    def _read(self, variable):
        return ops.cast(variable, self.compute_dtype)

    def _project(self, rows, projection):
        return rows if projection is None else ops.matmul(rows, self._read(projection))

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary_size": self.vocabulary_size,
            "output_dim": self.output_dim,
            "cutoffs": list(self.cutoffs),
            "div_val": self.div_val,
            "embedding_dim": self.embedding_dim,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "projection_initializer": keras.initializers.serialize(self.projection_initializer),
        }
