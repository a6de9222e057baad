"""One worker of `tf.distribute.MultiWorkerMirroredStrategy` training, for
test_multi_worker (which sets TF_CONFIG: two workers on loopback ports).

Usage: TF_CONFIG=... python multi_worker_process.py DIR

Loads DIR/model.keras and DIR/case.npz (x, y), takes the steps of SGD the
test takes on one device with the same global batch, and writes the weights
to DIR/worker<index>.npz.
"""

import json
import os
import pathlib
import sys

import keras
import numpy as np
import tensorflow as tf

import keras_relrec  # noqa: F401  (registers the layers)

GLOBAL_BATCH = 4


def main(folder):
    folder = pathlib.Path(folder)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    data = np.load(folder / "case.npz")
    with strategy.scope():
        model = keras.saving.load_model(folder / "model.keras", safe_mode=True)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    dataset = tf.data.Dataset.from_tensor_slices((data["x"], data["y"])).batch(GLOBAL_BATCH)
    # Each worker takes its half of every global batch.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    model.fit(dataset.with_options(options), epochs=1, verbose=0)
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    np.savez(folder / f"worker{index}.npz", *[np.asarray(w) for w in model.get_weights()])


if __name__ == "__main__":
    main(sys.argv[1])
