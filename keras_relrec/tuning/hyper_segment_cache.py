"""A keras-tuner HyperModel of a sequence model on the segment cache."""

from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.layers import SegmentCacheTransformer
from keras_relrec.layers.transformer_xl import segment_cache
from keras_relrec.layers.transformer_xl import segment_summary
from keras_relrec.tuning.hyper_transformer_xl import HyperTransformerXL


class HyperSegmentCache(HyperTransformerXL):
    """`HyperTransformerXL` with the segment cache (`SegmentCacheTransformer`:
    a cache of N segments keyed by a summary, the top k recalled by
    relevance) in place of Transformer-XL's FIFO memory.

    Hyperparameters (names are stable; those of `HyperTransformerXL` with
    `mem_len` replaced by `num_slots`, `top_k`, `query` and `summary`):

    | name | type | default space | default |
    |---|---|---|---|
    | num_layers | Int | 1 to 4 | 2 |
    | num_heads | Choice | 1, 2, 4 | 2 |
    | head_size | Choice | 16, 32, 64 | 32 |
    | hidden_dim | Choice | 64, 128, 256 | 128 |
    | intermediate_dim | Choice | 128, 256, 512 | 256 |
    | num_slots | Choice | 2, 4, 8 | 4 |
    | top_k | Choice | 1, 2 | 2 |
    | query | Choice | causal, standard, compute_first | causal |
    | summary | Choice | dense, mlp, bilstm | dense |
    | dropout | Float | 0.0 to 0.3, step 0.1 | 0.1 |
    | pre_lnorm | Boolean | False, True | False |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.001 |

    Args:
        input_shape, num_classes, segment_len, vocabulary_size, seed, name,
            tunable: As `HyperTransformerXL`.
        num_layers, num_heads, head_size, hidden_dim, intermediate_dim,
            num_slots, top_k, query, summary, dropout, pre_lnorm,
            learning_rate: Of `SegmentCacheTransformer` and Adam; each a
            fixed value, a keras-tuner hyperparameter object or `None` for
            the default space above.

    Example:

    ```python
    hypermodel = HyperSegmentCache((None, 8), num_classes=16, segment_len=8, query="causal")
    tuner = keras_tuner.RandomSearch(hypermodel, objective="val_accuracy", max_trials=10)
    ```
    """

    model_name = "segment_cache_transformer"

    def __init__(self, input_shape, num_classes, segment_len, vocabulary_size=None, num_layers=None,
                 num_heads=None, head_size=None, hidden_dim=None, intermediate_dim=None, num_slots=None,
                 top_k=None, query=None, summary=None, dropout=None, pre_lnorm=None, learning_rate=None,
                 seed=None, name=None, tunable=True):
        self._set_up(input_shape, num_classes, segment_len, vocabulary_size, seed, name, tunable,
                     dict(num_layers=num_layers, num_heads=num_heads, head_size=head_size, hidden_dim=hidden_dim,
                          intermediate_dim=intermediate_dim, dropout=dropout, pre_lnorm=pre_lnorm,
                          learning_rate=learning_rate, num_slots=num_slots, top_k=top_k, query=query,
                          summary=summary))

    def memory_space(self):
        return {
            "num_slots": hp_types.Choice("num_slots", [2, 4, 8], default=4),
            "top_k": hp_types.Choice("top_k", [1, 2], default=2),
            "query": hp_types.Choice("query", list(segment_cache.QUERIES), default="causal"),
            "summary": hp_types.Choice("summary", list(segment_summary.KINDS), default="dense"),
        }

    def backbone(self, hp, **common):
        return SegmentCacheTransformer(
            num_slots=self.value(hp, "num_slots"), top_k=self.value(hp, "top_k"),
            query=self.value(hp, "query"), summary=self.value(hp, "summary"), **common,
        )
