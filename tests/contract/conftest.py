import zlib

import keras
import pytest

from keras_relrec.export import export_tflite
from tests.contract.conformance import exported_model


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """`exported(entry, kind)` → (model, path, summary): the entry's model
    of `kind` (`conformance.exported_model`) converted to LiteRT once per
    session, for every check that reads the file. The tests that use it
    share an xdist group ("exports"), so that one worker converts. Each
    (entry, kind) has a seed of its own, so that the model's weights do not
    depend on which test asked first."""
    folder = tmp_path_factory.mktemp("exported")
    files = {}

    def get(entry, kind):
        # On every call, so that what the test draws next does not depend
        # on whether the model was built now.
        keras.utils.set_random_seed(zlib.crc32(f"{entry.id}/{kind}".encode()))
        if (entry.id, kind) not in files:
            model, options = exported_model(entry, kind)
            path = folder / f"{entry.id}.{kind.replace(' ', '-')}.tflite"
            files[entry.id, kind] = model, path, export_tflite(model, path, **options)
        return files[entry.id, kind]

    return get
