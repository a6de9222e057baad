"""keras_relrec: relational and recurrent sequence layers for Keras 3.

Importing the package registers every public layer with Keras' serializable
registry, so `.keras` files that use them load with nothing more than
`import keras_relrec`; `keras_relrec.save_model` writes them so that a
killed save never leaves a broken file.
"""

from keras_relrec import constraints
from keras_relrec import layers
from keras_relrec import models
from keras_relrec.saving import save_model
from keras_relrec.version import __version__
