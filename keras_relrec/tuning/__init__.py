"""keras-tuner HyperModels of the package's families (extra `[tuning]`).

Not imported by `keras_relrec`: `import keras_relrec.tuning` needs
keras-tuner (and, on the TensorFlow backend, tensorboard, which keras-tuner
imports before every trial; the extra brings both, and scikit-learn for
`BayesianOptimization`). Each HyperModel documents its hyperparameters in a
table whose names are stable.
"""

from keras_relrec.tuning.hyper_drrt import HyperDRRT
from keras_relrec.tuning.hyper_nbof import HyperNBoF
from keras_relrec.tuning.hyper_r_transformer import HyperRTransformer
from keras_relrec.tuning.hyper_relational_memory import HyperRelationalMemory
from keras_relrec.tuning.hyper_segment_cache import HyperSegmentCache
from keras_relrec.tuning.hyper_tabl import HyperTABL
from keras_relrec.tuning.hyper_transformer_xl import HyperTransformerXL
