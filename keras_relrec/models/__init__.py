"""Ready networks built from keras_relrec's layers."""

from keras_relrec.models.drrt_classifier import drrt_classifier
from keras_relrec.models.front_end import FrontEnd
from keras_relrec.models.front_end import choose_scaling
from keras_relrec.models.front_end import local_front_end
from keras_relrec.models.front_end import resolve_front_end
from keras_relrec.models.front_end import scaled_inputs
from keras_relrec.models.front_end import sequence_inputs
from keras_relrec.models.nbof_classifiers import fit_codebook
from keras_relrec.models.nbof_classifiers import nbof_classifier
from keras_relrec.models.nbof_classifiers import recurrent_nbof_classifier
from keras_relrec.models.recipes import BUILDERS
from keras_relrec.models.recipes import FRONT_END_RECIPES
from keras_relrec.models.recipes import RECIPES
from keras_relrec.models.recipes import BuilderSpec
from keras_relrec.models.recipes import Recipe
from keras_relrec.models.recipes import builder_spec
from keras_relrec.models.recipes import normalization_statistics
from keras_relrec.models.recipes import recipe_for
from keras_relrec.models.recipes import split_channels
from keras_relrec.models.recipes import train_classifier
from keras_relrec.models.recipes import warp_series
from keras_relrec.models.tabl_networks import class_weights
from keras_relrec.models.tabl_networks import compile_as_in_paper
from keras_relrec.models.tabl_networks import tabl_network
from keras_relrec.models.training_state import build_training_state
from keras_relrec.models.transformer_xl_generator import TransformerXLGenerator
