"""Runs `.tflite` files in the tflite-runtime of the interpreter running
this script (an older runtime in its own environment: it imports neither
keras_relrec nor TensorFlow).

    python old_runtime_worker.py JOB.npz OUT.npz

JOB.npz: `path` (the file), `signature`, and one array per input by name.
OUT.npz: one array per output by name, or `error` (what the runtime said
when it could not load or run the file).

`run_in(python, ...)` is the other side: it writes the job, runs this script
with `python` (the old runtime's environment) and reads the result.
"""

import pathlib
import subprocess
import sys

import numpy as np


def run_in(python, path, signature, inputs):
    """{output name: array}, or {"error": what the runtime said}, from
    running signature `signature` of `path` on `inputs` in the environment
    of `python`; the job's files go beside `path`."""
    path = pathlib.Path(path)
    job, out = path.with_suffix(".job.npz"), path.with_suffix(".out.npz")
    np.savez(job, path=np.array(str(path)), signature=np.array(signature), **inputs)
    subprocess.run([python, __file__, str(job), str(out)], check=True, capture_output=True)
    result = dict(np.load(out))
    return {"error": str(result["error"])} if "error" in result else result


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
