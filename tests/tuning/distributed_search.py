"""One process of a distributed keras-tuner search: the chief or a worker,
by keras-tuner's own environment (KERASTUNER_TUNER_ID, KERASTUNER_ORACLE_IP,
KERASTUNER_ORACLE_PORT). Used by test_distributed_tuning.

    python tests/tuning/distributed_search.py FOLDER MAX_TRIALS

Every trial a worker starts is logged as a line "<tuner id> <trial id>" in
FOLDER/started.log; epochs are slowed so that a test can kill a worker in
the middle of one.
"""

import os
import pathlib
import sys
import time

import keras
import keras_tuner
import numpy as np

from keras_relrec.tuning import HyperTABL


class SlowEpochs(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        time.sleep(1.0)


class LoggedSearch(keras_tuner.RandomSearch):
    def run_trial(self, trial, *args, **kwargs):
        with open(pathlib.Path(self.directory) / "started.log", "a") as log:
            log.write(f"{os.environ['KERASTUNER_TUNER_ID']} {trial.trial_id}\n")
        return super().run_trial(trial, *args, **kwargs)


def main(folder, max_trials):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 10, 6)).astype("float32")
    y = rng.integers(0, 3, 32)
    hypermodel = HyperTABL((10, 6), 3, config="A", max_norm=0.0)
    tuner = LoggedSearch(hypermodel, objective="val_loss", max_trials=max_trials, directory=folder,
                         project_name="search", seed=1)
    tuner.search(x, y, validation_split=0.25, epochs=3, batch_size=8, verbose=0, callbacks=[SlowEpochs()])


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
