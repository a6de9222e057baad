"""The Deep (Recurrent) Relation Transformer of seed 000: relation modules
between two sequences and the interaction transformer built on them."""

from keras_relrec.layers.relation_transformer.global_relation import GlobalRelation
from keras_relrec.layers.relation_transformer.interaction_transformer import InteractionTransformer
from keras_relrec.layers.relation_transformer.regional_relation import RegionalRelation
