"""The Deep (Recurrent) Relation Transformer (Belanger Nzakimuena, "Deep
Recurrent Relation Transformer", 2022, after Song et al. 2021): relation modules
between two sequences and the interaction transformer built on them."""

from keras_relrec.layers.relation_transformer.global_relation import GlobalRelation
from keras_relrec.layers.relation_transformer.interaction_transformer import InteractionTransformer
from keras_relrec.layers.relation_transformer.regional_relation import RegionalRelation
