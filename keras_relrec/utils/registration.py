"""Registration of public layers.

Every public layer and cell is decorated with `register_layer`: it becomes
loadable from a `.keras` file after `import keras_relrec` (Keras'
serializable registry, package "keras_relrec"), and it is recorded in
`PUBLIC_LAYERS` so that the contract test suite can check that no public class
is missing from its registry.
"""

import keras

PACKAGE = "keras_relrec"

# Maps "keras_relrec>ClassName" to the class, in registration order.
PUBLIC_LAYERS = {}


def register_layer(cls):
    """Registers `cls` as serializable and records it as a public layer."""
    cls = keras.saving.register_keras_serializable(package=PACKAGE)(cls)
    PUBLIC_LAYERS[f"{PACKAGE}>{cls.__name__}"] = cls
    return cls
