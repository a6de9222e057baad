"""Ready networks built from keras_relrec's layers."""

from keras_relrec.models.nbof_classifiers import nbof_classifier
from keras_relrec.models.nbof_classifiers import recurrent_nbof_classifier
