"""Runs a `.tflite` file in the tflite-micro interpreter: the smallest tensor
arena it runs in, or what TFLM said.

TFLM's native code can crash the process on a file it does not support, or
on an arena too small for it, instead of failing: `micro_check.check` runs
this module as a script in a child process that imports neither Keras nor
TensorFlow (`python micro_probe.py FILE` prints one JSON line,
{"arena_bytes": N} or {"error": "..."}), and the script tries each arena
in a forked child of its own. It is also the in-process loader of
`micro_interpreter`'s runners.
"""

import contextlib
import json
import os
import sys
import tempfile

import numpy as np

# The arena the search starts from, and its ceiling.
FIRST_ARENA = 64 * 1024
LARGEST_ARENA = 1 << 28
# Arenas are searched to this granularity (TFLM aligns buffers to 16 bytes).
ARENA_STEP = 16
NOT_INSTALLED = (
    "target='micro' checks the file in the tflite-micro interpreter, which is not installed: "
    "pip install 'keras_relrec[micro]'"
)


def runtime():
    """tflite-micro's Python runtime, or ImportError saying how to get it."""
    try:
        from tflite_micro.python.tflite_micro import runtime as micro_runtime
    except ImportError:
        raise ImportError(NOT_INSTALLED) from None
    return micro_runtime


def available():
    """Whether the tflite-micro interpreter is installed."""
    try:
        runtime()
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def _native_output(lines):
    """Collects what native code prints on stdout and stderr (TFLM reports
    a missing op there, not in its exception) into `lines`."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").splitlines())


def interpreter(content, arena_size, capture=True):
    """(interpreter, None) once the file is allocated in an arena of
    `arena_size` bytes and invoked on zeros, or (None, what TFLM said).
    Without `capture`, what TFLM prints goes to this process's own output
    (for a parent to read even if TFLM crashes)."""
    lines = []
    try:
        with _native_output(lines) if capture else contextlib.nullcontext():
            micro = runtime()
            loaded = micro.Interpreter.from_bytes(bytes(content), arena_size=int(arena_size))
            count = len(micro.convert_bytearray_to_object(bytearray(content)).subgraphs[0].inputs)
            for position in range(count):
                detail = loaded.get_input_details(position)
                loaded.set_input(np.zeros(detail["shape"], detail["dtype"]), position)
            loaded.invoke()
    except (RuntimeError, ValueError) as error:
        said = [line.strip() for line in lines if line.strip()]
        return None, "; ".join(said) or str(error)
    return loaded, None


def _trial(content, arena_size):
    """(whether the file runs in `arena_size` bytes, what TFLM printed), in
    a forked child: TFLM crashes on some arenas too small for a file rather
    than failing, and a crash there is a no."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        pid = os.fork()
        if pid == 0:  # the child: TFLM's output to `sink`, its verdict as exit status
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            try:
                loaded, message = interpreter(content, arena_size, capture=False)
            except Exception as error:  # TFLM's Python loader on a file it cannot read: one line, no traceback
                loaded, message = None, f"it does not load: {error}"
            if loaded is None:
                os.write(2, f"\n{message}\n".encode())
            os._exit(0 if loaded is not None else 1)
        _, status = os.waitpid(pid, 0)
        sink.seek(0)
        said = [line.strip() for line in sink.read().decode(errors="replace").splitlines() if line.strip()]
    if os.WIFSIGNALED(status):
        said.append(f"the interpreter crashed (signal {os.WTERMSIG(status)})")
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "; ".join(said)


def smallest_arena(content):
    """{"arena_bytes": the smallest arena (to 16 bytes) in which the file is
    allocated and invoked} or {"error": what TFLM said in the largest}."""
    # Loaded once here, the native runtime is in every forked trial: a
    # trial that loads it itself takes several times as long.
    runtime()
    arena = FIRST_ARENA
    while True:
        runs, message = _trial(content, arena)
        if runs:
            break
        # A missing op fails in any arena; anything else may be the arena.
        if "Didn't find op" in message or arena >= LARGEST_ARENA:
            return {"error": message}
        arena *= 4
    low, high = 0, arena  # runs in `high`, not in `low`
    while high - low > ARENA_STEP:
        middle = (low + high) // 2 // ARENA_STEP * ARENA_STEP
        if _trial(content, middle)[0]:
            high = middle
        else:
            low = middle
    return {"arena_bytes": high}


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as file:
        found = smallest_arena(file.read())
    print(json.dumps(found))
