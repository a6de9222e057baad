"""The writers of the class check `test_file_writes.py`, and the process
that runs them: it imports Keras and TensorFlow once, then for each request
on stdin (a JSON line: writer, folder, version) forks a child that writes
and says on stdout `entered <pid>` (the writer opened
`atomic_files.replacing`: the moment to kill it from) and `exit <status>`.
Forking spares each run TensorFlow's import (seconds); nothing of
TensorFlow runs in this process before the fork.

WRITERS: {name: (its target files or folders, by name in the folder, a
folder's without a suffix; write(folder, version))}. Every file the package
writes is written by one of them: a new writer joins by one entry.
"""

import contextlib
import json
import os
import pathlib
import sys
import traceback


def _model(version):
    import keras

    keras.utils.set_random_seed({"old": 1, "new": 2}[version])
    inputs = keras.Input((None, 3), name="sequence")
    return keras.Model(inputs, keras.layers.GRU(4, return_sequences=True)(inputs))


def _tflite(folder, version):
    from keras_relrec.export import export_tflite

    export_tflite(_model(version), folder / "m.tflite")


def _tflite_pair(folder, version):
    from keras_relrec.export import export_tflite

    export_tflite(_model(version), folder / "s.tflite", streaming=True, target="accelerator")


def _saved_model(folder, version):
    from keras_relrec.export import export_saved_model

    export_saved_model(_model(version), folder / "sm")


def _command(folder, version):
    import keras_relrec_cli

    model = folder / f"input_{version}.keras"
    if not model.exists():
        _model(version).save(model)  # the command's input, not under test
    argv = ["export", str(model), "--tflite", str(folder / "c.tflite"), "--streaming", "--target", "accelerator"]
    if keras_relrec_cli.main(argv) != 0:
        raise RuntimeError("the command failed")


def _card(folder, version):
    from keras_relrec.utils import model_card

    model_card.write_card(folder / "card.json", {"version": version, "runs": list(range(2000))})


def _keras_model(folder, version):
    # The users', the tutorials' and the demo's saved models.
    import keras_relrec

    keras_relrec.save_model(_model(version), folder / "model.keras")


WRITERS = {
    "export_tflite": (["m.tflite"], _tflite),
    "export_tflite streaming, with its .npz": (["s.tflite", "s.initial_state.npz"], _tflite_pair),
    "export_saved_model": (["sm"], _saved_model),
    "keras-relrec export": (["c.tflite", "c.initial_state.npz"], _command),
    "model card": (["card.json"], _card),
    "save_model": (["model.keras"], _keras_model),
}


def shared_objects_numbered(config):
    """A `.keras` file's config.json with Keras' `shared_object_id`s (the
    `id()` of an object two parts of the model share, an address that
    differs from save to save) numbered in their order instead."""
    numbers = {}

    def renumbered(value):
        if isinstance(value, dict):
            return {key: numbers.setdefault(item, len(numbers)) if key == "shared_object_id" else renumbered(item)
                    for key, item in value.items()}
        return [renumbered(item) for item in value] if isinstance(value, list) else value

    return json.dumps(renumbered(json.loads(config)), sort_keys=True)


def is_folder(target):
    """Whether a target of `WRITERS` is a folder (its name has no suffix)."""
    return not pathlib.Path(target).suffix


def _announce_writes():
    """Says `entered` whenever a writer opens `atomic_files.replacing`."""
    from keras_relrec.utils import atomic_files

    original = atomic_files.replacing

    @contextlib.contextmanager
    def announced(*paths):
        os.write(1, f"entered {os.getpid()}\n".encode())
        with original(*paths) as temps:
            yield temps

    atomic_files.replacing = announced


def _serve():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras  # noqa: F401  (imported once, before the forks)

    import keras_relrec.export  # noqa: F401
    import keras_relrec_cli  # noqa: F401

    _announce_writes()
    os.write(1, b"ready\n")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                WRITERS[request["writer"]][1](pathlib.Path(request["folder"]), request["version"])
            except BaseException:
                traceback.print_exc()
                status = 1
            os._exit(status)  # no TensorFlow teardown in a fork
        _, status = os.waitpid(pid, 0)
        os.write(1, f"exit {status}\n".encode())


if __name__ == "__main__":
    _serve()
