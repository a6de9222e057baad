"""Runs `.tflite` files in the tflite-runtime of the interpreter running
this script (an older runtime in its own environment: it imports neither
keras_relrec nor TensorFlow).

    python old_runtime_worker.py JOB.npz OUT.npz

JOB.npz: `path` (the file), `signature`, and one array per input by name.
OUT.npz: one array per output by name, or `error` (what the runtime said
when it could not load or run the file).
"""

import sys

import numpy as np


def main(job_path, out_path):
    # Imported here: pytest imports this file too (doctests), where the
    # old runtime is not installed.
    import tflite_runtime.interpreter as tflite

    job = dict(np.load(job_path))
    path, signature = str(job.pop("path")), str(job.pop("signature"))
    try:
        runner = tflite.Interpreter(model_path=path).get_signature_runner(signature)
        outputs = runner(**job)
    except Exception as error:  # the runtime's own message is the result
        np.savez(out_path, error=np.array(str(error)))
        return
    np.savez(out_path, **outputs)


if __name__ == "__main__":
    main(*sys.argv[1:])
