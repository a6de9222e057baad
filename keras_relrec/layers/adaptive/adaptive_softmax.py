"""The adaptive softmax: a head over the frequent tokens and the clusters,
and a softmax within each cluster of rarer tokens."""

import keras
from keras import ops

from keras_relrec.layers.adaptive.adaptive_embedding import AdaptiveEmbedding
from keras_relrec.layers.adaptive.clusters import Clusters
from keras_relrec.layers.adaptive.clusters import ClusterSettings
from keras_relrec.ops import take_along_last_axis
from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer


@register_layer
class AdaptiveSoftmax(ClusterSettings, keras.layers.Layer):
    """Log-probabilities of the next token from an adaptive softmax, and the
    loss on given targets.

    Grave, Joulin, Cissé, Grangier and Jégou, "Efficient softmax
    approximation for GPUs", ICML 2017, in the projected form of Dai et
    al.'s Transformer-XL code. The vocabulary is cut into the clusters
    [l_i, r_i) of `cutoffs` (as `AdaptiveEmbedding`), cluster i of width
    d_i = d_e // div_val^i with a table W_i (r_i − l_i, d_i), a bias b_i
    and a projection P_i (d, d_i) from the input's width d. The head scores
    the shortlist (cluster 0) and one entry per further cluster, with its
    own weights C (n − 1, d_0) and c:

    ```
    head(h) = log_softmax([h P_0 W_0ᵀ + b_0,  h P_0 Cᵀ + c])
    log p(t | h) = head(h)[t]                                       t in cluster 0
    log p(t | h) = head(h)[l_1 + i − 1] + log_softmax(h P_i W_iᵀ + b_i)[t − l_i]    t in cluster i ≥ 1
    ```

    (with one cluster, log_softmax(h P_0 W_0ᵀ + b_0): a projected
    softmax). With div_val = 1 the clusters are row ranges of one table W
    and one bias; a projection exists per cluster with div_val > 1, and
    with div_val = 1 where d_e ≠ d. Tied to an `AdaptiveEmbedding`
    (`tied_embedding`), W_i are its tables (`tie_tables`), and P_i its
    projections (transposed) for the clusters that `tie_projections` names;
    the biases, C and c are this layer's own.

    Called on hidden states alone, it returns the log-probabilities of the
    whole vocabulary (what a generator samples from). Called with
    `targets`, it returns −log p(target) at each position without forming
    them: the head's log-softmax, and in each further cluster the
    log-sum-exp of its logits and its target's logit (each cluster's
    logits are computed for every position in turn, a fixed shape that a
    compiled training step can hold; the vocabulary's are never
    concatenated).

    Args:
        vocabulary_size: Number of tokens.
        cutoffs, div_val, embedding_dim: The clusters, as in
            `AdaptiveEmbedding` (`embedding_dim` defaults to the input's
            width); with `tied_embedding`, equal to its (or left out, for
            `embedding_dim`).
        tied_embedding: Optional `AdaptiveEmbedding` whose weights this
            layer shares (the variables, not copies).
        tie_tables: With `tied_embedding`: whether W_i are its tables
            (default True).
        tie_projections: With `tied_embedding`: a bool, or one per cluster,
            whether P_i is the embedding's projection (Transformer-XL's
            WT103 model ties all but the first: `[False, True, True, True]`).
        kernel_initializer: Of the untied tables and of C; default normal
            with standard deviation 0.02.
        bias_initializer: Of b_i and c; default zeros.
        projection_initializer: Of the untied projections; default normal
            with standard deviation 0.01.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, d) hidden states.
        targets: Optional integer (batch, steps) token ids in
            0 … vocabulary_size − 1.
        mask: Optional boolean (batch, steps): with `targets`, a masked
            position's loss is 0.

    Returns:
        Without `targets`, (batch, steps, vocabulary_size)
        log-probabilities; with them, (batch, steps) negative
        log-likelihoods.

    Saving: a `.keras` file of a tied layer keeps the tied weights' values
    with it; reloaded, the layer holds them as its own (the model computes
    the same, but training no longer ties them).

    Example:

    ```python
    embedding = keras_relrec.layers.AdaptiveEmbedding(1000, 16, cutoffs=[100, 500], div_val=2)
    backbone = keras_relrec.layers.TransformerXL(
        num_layers=2, num_heads=2, head_size=8, hidden_dim=16, intermediate_dim=32,
        segment_len=8, mem_len=8, embedding=embedding)
    softmax = keras_relrec.layers.AdaptiveSoftmax(
        1000, cutoffs=[100, 500], div_val=2, tied_embedding=embedding, tie_projections=True)
    tokens, targets = keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")
    model = keras.Model([tokens, targets], softmax(backbone(tokens), targets=targets))
    model.compile("adam", loss=lambda _, nll: nll)  # the model's output is the loss
    ```
    """

    # Each position's scores are its own hidden state's (see StreamingLayer).
    acts_per_step = True

    def __init__(self, vocabulary_size, cutoffs=(), div_val=1, embedding_dim=None, tied_embedding=None,
                 tie_tables=True, tie_projections=False, kernel_initializer=None, bias_initializer="zeros",
                 projection_initializer=None, **kwargs):
        super().__init__(**kwargs)
        if tied_embedding is not None and not isinstance(tied_embedding, AdaptiveEmbedding):
            raise ValueError(
                "Argument `tied_embedding` must be a keras_relrec.layers.AdaptiveEmbedding whose tables this "
                f"layer shares; received tied_embedding={tied_embedding!r}."
            )
        # Kept out of Keras' tracking: the embedding belongs to the model
        # that embeds with it, and is saved there.
        object.__setattr__(self, "_tied", tied_embedding)
        # The widths wait for the input's where embedding_dim is not given.
        self.clusters = Clusters(vocabulary_size, cutoffs, div_val, embedding_dim)
        if tied_embedding is not None:
            self._check_tie(tied_embedding)
        count = self.clusters.count
        self.tie_tables = validation.check_bool("tie_tables", tie_tables) and tied_embedding is not None
        if isinstance(tie_projections, (list, tuple)):
            if len(tie_projections) != count:
                raise ValueError(
                    f"Argument `tie_projections` takes one bool per cluster ({count}); received "
                    f"tie_projections={tie_projections!r}."
                )
            self.tie_projections = [validation.check_bool("tie_projections", t) for t in tie_projections]
        else:
            self.tie_projections = [validation.check_bool("tie_projections", tie_projections)] * count
        if any(self.tie_projections) and tied_embedding is None:
            raise ValueError(
                "Argument `tie_projections` ties projections to those of an embedding: pass it with "
                f"`tied_embedding`; received tie_projections={tie_projections!r} and no tied_embedding."
            )
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.RandomNormal(stddev=0.02))
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.projection_initializer = keras.initializers.get(
            projection_initializer or keras.initializers.RandomNormal(stddev=0.01))
        self.supports_masking = True

    def _check_tie(self, embedding):
        clusters = self.clusters
        theirs = (embedding.vocabulary_size, embedding.cutoffs, embedding.div_val)
        ours = (clusters.vocabulary_size, clusters.cutoffs, clusters.div_val)
        if ours != theirs or clusters.embedding_dim not in (None, embedding.embedding_dim):
            raise ValueError(
                "Argument `tied_embedding` must have this layer's clusters: vocabulary_size, cutoffs, div_val "
                f"{ours} and embedding_dim {clusters.embedding_dim}; received an embedding with {theirs} and "
                f"embedding_dim {embedding.embedding_dim}."
            )
        self.clusters = clusters.with_width(embedding.embedding_dim)

    @property
    def tied_embedding(self):
        return self._tied

    def build(self, inputs_shape, targets_shape=None):
        width = inputs_shape[-1]
        if len(inputs_shape) != 3 or width is None:
            raise ValueError(
                f"AdaptiveSoftmax expects inputs (batch, steps, d) of a known width d; received input of shape "
                f"{tuple(inputs_shape)}."
            )
        self.input_spec = keras.layers.InputSpec(ndim=3, axes={-1: width})
        self.input_width = width
        if self.clusters.embedding_dim is None:
            self.clusters = self.clusters.with_width(width)
        clusters = self.clusters
        tied = self._tied
        if tied is not None:
            if tied.output_dim != width:
                raise ValueError(
                    f"AdaptiveSoftmax's inputs are {width} wide, and its tied embedding's outputs "
                    f"{tied.output_dim}: a tied softmax takes the model's width (output_dim). Give inputs "
                    f"(batch, …, {tied.output_dim})."
                )
            if not tied.built:
                tied.build((None, None))
        def weight(name, shape, initializer):
            return self.add_weight(name=name, shape=shape, initializer=clone_initializer(initializer, name))

        shapes = clusters.table_shapes()
        self.kernels = [None if self.tie_tables
                        else weight(clusters.weight_name("kernel", i), shape, self.kernel_initializer)
                        for i, shape in enumerate(shapes)]
        self.biases = [weight(clusters.weight_name("bias", i), shape[:1], self.bias_initializer)
                       for i, shape in enumerate(shapes)]
        self.projections = [
            None if not clusters.projects(width) or self.tie_projections[i]
            else weight(f"projection_{i}", (width, clusters.widths[i]), self.projection_initializer)
            for i in range(clusters.count)
        ]
        if clusters.count > 1:
            self.cluster_kernel = weight("cluster_kernel", (clusters.count - 1, clusters.embedding_dim),
                                         self.kernel_initializer)
            self.cluster_bias = weight("cluster_bias", (clusters.count - 1,), self.bias_initializer)

    def _as_untied(self):
        """[(variable, transposed)]: the weights in the order an untied
        layer of this config builds them (how a `.keras` file keeps a tied
        one); `transposed` where the variable is a tied projection."""
        tied, clusters = self._tied, self.clusters
        projects = clusters.projects(self.input_width)
        tables = tied.tables if self.tie_tables else self.kernels
        projections = [
            (own, False) if own is not None or not projects else (tied.cluster_weights(i)[1], True)
            for i, own in enumerate(self.projections)
        ]
        heads = [self.cluster_kernel, self.cluster_bias] if clusters.count > 1 else []
        return ([(t, False) for t in tables] + [(b, False) for b in self.biases]
                + [p for p in projections if p[0] is not None] + [(h, False) for h in heads])

    def save_own_variables(self, store):
        if self._tied is None:
            return super().save_own_variables(store)
        for n, (variable, transposed) in enumerate(self._as_untied()):
            value = ops.convert_to_numpy(variable)
            store[str(n)] = value.T if transposed else value

    def load_own_variables(self, store):
        if self._tied is None:
            return super().load_own_variables(store)
        weights = self._as_untied()
        if len(store.keys()) != len(weights):
            raise ValueError(
                f"AdaptiveSoftmax '{self.name}' holds {len(weights)} weights (with those it shares); the file "
                f"gives {len(store.keys())}."
            )
        for n, (variable, transposed) in enumerate(weights):
            value = store[str(n)]
            variable.assign(value.T if transposed else value)

    def cluster_weights(self, i):
        """Cluster i's table (r_i − l_i, d_i), bias (r_i − l_i,) and
        projection (d, d_i) or None, in the dtype of the logits (the
        compute dtype, float32 under mixed precision)."""
        table = projection = None
        if self._tied is not None:
            table, projection = self._tied.cluster_weights(i)
            table = table if self.tie_tables else None
            projection = None if projection is None or not self.tie_projections[i] else ops.transpose(projection)
        if table is None:
            table = self.clusters.rows(self.kernels, i)
        if projection is None:
            projection = self.projections[i]
        bias = self.clusters.rows(self.biases, i)
        return [None if w is None else ops.cast(w, self._dtype) for w in (table, bias, projection)]

    def _logits(self, hidden, i, table=None, bias=None):
        """h P_i W_iᵀ + b_i, or with the given table and bias (the head's)."""
        own_table, own_bias, projection = self.cluster_weights(i)
        table = own_table if table is None else table
        bias = own_bias if bias is None else bias
        if projection is not None:
            hidden = ops.matmul(hidden, projection)
        return ops.matmul(hidden, ops.transpose(table)) + bias

    def _head(self, hidden):
        """The head's log-softmax: the shortlist, then one entry per
        further cluster."""
        table, bias, _ = self.cluster_weights(0)
        if self.clusters.count > 1:
            table = ops.concatenate([table, ops.cast(self.cluster_kernel, self._dtype)], axis=0)
            bias = ops.concatenate([bias, ops.cast(self.cluster_bias, self._dtype)], axis=0)
        return ops.log_softmax(self._logits(hidden, 0, table, bias), axis=-1)

    @property
    def _dtype(self):
        """What the logits are computed in: float16's range would overflow
        the sum of a cluster of over 65,504 tokens (WT103 has one of
        160,000)."""
        return at_least_float32(self.compute_dtype)

    def call(self, inputs, targets=None, mask=None):
        hidden = ops.cast(inputs, self._dtype)
        head = self._head(hidden)
        shortlist = self.clusters.bounds[0][1]
        if targets is None:
            parts = [head[..., :shortlist]]
            for i in range(1, self.clusters.count):
                tail = ops.log_softmax(self._logits(hidden, i), axis=-1)
                parts.append(head[..., shortlist + i - 1, None] + tail)
            log_probs = ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]
            return ops.cast(log_probs, self.compute_dtype)
        self._check_targets(inputs, targets)
        _check_mask_shape(tuple(targets.shape), None if mask is None else tuple(mask.shape))
        targets = ops.cast(targets, "int32")
        cluster = sum(ops.cast(targets >= left, "int32") for left, _ in self.clusters.bounds[1:]) \
            if self.clusters.count > 1 else ops.zeros_like(targets)
        head_place = ops.where(cluster == 0, targets, shortlist + cluster - 1)
        loss = -take_along_last_axis(head, head_place[..., None])[..., 0]
        for i in range(1, self.clusters.count):
            left = self.clusters.bounds[i][0]
            inside = cluster == i
            logits = self._logits(hidden, i)
            picked = take_along_last_axis(logits, ops.where(inside, targets - left, 0)[..., None])[..., 0]
            loss = loss + ops.where(inside, ops.logsumexp(logits, axis=-1) - picked, 0.0)
        loss = ops.cast(loss, self.compute_dtype)
        return loss if mask is None else zero_masked(loss[..., None], mask)[..., 0]

    def _check_targets(self, inputs, targets):
        """Integer ids, one per position of `inputs` (sizes compared where
        known), in the vocabulary (eagerly)."""
        _check_targets_shape(tuple(inputs.shape), tuple(targets.shape), keras.backend.standardize_dtype(targets.dtype))
        validation.check_token_ids(self, targets, self.vocabulary_size, name="targets")

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, inputs_shape, targets_shape=None):
        if targets_shape is not None:
            _check_targets_shape(tuple(inputs_shape), tuple(targets_shape))
            return tuple(inputs_shape[:-1])
        return (*inputs_shape[:-1], self.vocabulary_size)

    def get_config(self):
        config = {
            "vocabulary_size": self.vocabulary_size,
            "cutoffs": list(self.cutoffs),
            "div_val": self.div_val,
            "embedding_dim": self.embedding_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "projection_initializer": keras.initializers.serialize(self.projection_initializer),
        }
        return {**super().get_config(), **config}


def _check_targets_shape(inputs_shape, targets_shape, dtype="int32"):
    """Integer targets, one per position of inputs of `inputs_shape`: the
    rank, and each size where both are known."""
    expected = inputs_shape[:-1]
    if "int" not in dtype or not validation.shapes_agree(targets_shape, expected):
        raise ValueError(
            f"AdaptiveSoftmax expects `targets` of integer token ids, shape {expected} (one per position of "
            f"inputs {inputs_shape}); received targets of dtype {dtype} and shape {targets_shape}."
        )


def _check_mask_shape(targets_shape, mask_shape):
    """With targets, a mask of their shape (each size where both are
    known): another would be broadcast, or fail in the backend."""
    if mask_shape is not None and not validation.shapes_agree(mask_shape, targets_shape):
        raise ValueError(
            f"AdaptiveSoftmax expects `mask` of the targets' shape {targets_shape}, one boolean per position, true "
            f"where its loss counts; received mask of shape {mask_shape}."
        )
