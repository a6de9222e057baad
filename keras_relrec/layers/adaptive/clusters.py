"""The vocabulary's clusters that adaptive input embeddings and the adaptive
softmax share: the token ranges, each cluster's width, and the checks."""

import numbers

from keras_relrec.utils import validation


class Clusters:
    """Tokens 0 … vocabulary_size − 1 cut at `cutoffs` into clusters
    [l_i, r_i) (the first, the shortlist, the most frequent tokens when ids
    are ranked by frequency); cluster i is `embedding_dim // div_val**i`
    wide (all `embedding_dim` with div_val = 1)."""

    def __init__(self, vocabulary_size, cutoffs, div_val, embedding_dim=None):
        self.vocabulary_size = validation.check_positive_int("vocabulary_size", vocabulary_size)
        self.div_val = validation.check_positive_int("div_val", div_val)
        self.cutoffs = _check_cutoffs(cutoffs, self.vocabulary_size)
        edges = (0, *self.cutoffs, self.vocabulary_size)
        self.bounds = tuple(zip(edges[:-1], edges[1:]))
        # The widths wait for embedding_dim where a layer takes it from its input.
        self.embedding_dim = self.widths = None
        if embedding_dim is not None:
            self._set_widths(embedding_dim)

    def with_width(self, embedding_dim):
        """These clusters with a first width of `embedding_dim`."""
        return Clusters(self.vocabulary_size, self.cutoffs, self.div_val, embedding_dim)

    def _set_widths(self, embedding_dim):
        self.embedding_dim = validation.check_positive_int("embedding_dim", embedding_dim)
        self.widths = tuple(self.embedding_dim // self.div_val**i for i in range(len(self.bounds)))
        if self.widths[-1] < 1:
            raise ValueError(
                f"Argument `div_val` makes cluster widths embedding_dim // div_val**i = {list(self.widths)}; "
                f"every cluster needs at least one. Received div_val={self.div_val!r} with "
                f"embedding_dim={embedding_dim!r} and {len(self.cutoffs)} cutoffs: lower div_val or raise "
                "embedding_dim."
            )

    @property
    def count(self):
        return len(self.bounds)

    @property
    def table_count(self):
        """How many tables the clusters keep: one per cluster, or one for
        all with div_val = 1."""
        return 1 if self.div_val == 1 else self.count

    def table_index(self, i):
        """The table (and projection) cluster i reads."""
        return 0 if self.div_val == 1 else i

    def table_shapes(self):
        """(rows, width) of each table."""
        if self.div_val == 1:
            return [(self.vocabulary_size, self.embedding_dim)]
        return [(right - left, width) for (left, right), width in zip(self.bounds, self.widths)]

    def weight_name(self, base, i):
        """The name of table i's weight: `base`, or `base_i` for several."""
        return base if self.table_count == 1 else f"{base}_{i}"

    def rows(self, weights, i):
        """Cluster i's rows of per-table `weights` (tables, biases): its
        own, or its range of the one table."""
        weight = weights[self.table_index(i)]
        if self.div_val > 1 or self.count == 1:
            return weight
        left, right = self.bounds[i]
        return weight[left:right]

    def projects(self, output_dim):
        """Whether the clusters have projections to `output_dim` (always
        with div_val > 1; with one width, where it differs)."""
        return self.div_val > 1 or self.embedding_dim != output_dim


class ClusterSettings:
    """The clusters' settings, read off a layer's `clusters`, as properties
    (the adaptive layers' shared accessors)."""

    @property
    def vocabulary_size(self):
        return self.clusters.vocabulary_size

    @property
    def cutoffs(self):
        return self.clusters.cutoffs

    @property
    def div_val(self):
        return self.clusters.div_val

    @property
    def embedding_dim(self):
        return self.clusters.embedding_dim


def _check_cutoffs(cutoffs, vocabulary_size):
    """The cutoffs as a tuple of ints, increasing, within 1 … vocabulary_size − 1."""
    values = tuple(cutoffs) if isinstance(cutoffs, (list, tuple)) else None
    if values is None or any(isinstance(c, bool) or not isinstance(c, numbers.Integral) for c in values) or any(
            not 0 < b < vocabulary_size for b in values) or any(a >= b for a, b in zip(values, values[1:])):
        raise ValueError(
            "Argument `cutoffs` must be a list of increasing integers within 1 … vocabulary_size − 1 = "
            f"{vocabulary_size - 1}, where the clusters of the vocabulary start (e.g. [20000, 40000, 200000]; "
            f"[] for one cluster); received cutoffs={cutoffs!r}."
        )
    return tuple(int(c) for c in values)
