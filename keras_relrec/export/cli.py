"""The commands of `keras-relrec` (the launcher, `keras_relrec_cli`, parses
the arguments): export a `.keras` model, describe a `.tflite` file. Any
failure is one line on stderr and exit status 1."""

import sys
import zipfile

import keras
import numpy as np

import keras_relrec  # noqa: F401  (registers the layers)
from keras_relrec.export.export_error import ExportError
from keras_relrec.export.runtime import micro_interpreter
from keras_relrec.export.runtime import micro_probe
from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.saved_model import export_saved_model
from keras_relrec.export.tflite import accelerator
from keras_relrec.export.tflite import micro_check
from keras_relrec.export.tflite.converter import export_tflite


def _load(path, unsafe=False):
    """The model in the .keras file at `path`; with `unsafe`, loaded with
    safe_mode=False (it may run Python code from the file), after a warning."""
    if unsafe:
        print(f"keras-relrec: warning: --unsafe loads {path} with safe_mode=False, which runs any Python code the "
              "file holds; give it only files you trust", file=sys.stderr)
    # Keras says "File not found" for a .keras file that is not a whole zip.
    if str(path).endswith(".keras") and not zipfile.is_zipfile(path):
        raise ExportError(
            f"cannot load {path}: it is not a complete .keras archive (a zip file; it may be truncated or of "
            "another format); save the model again with model.save(...)"
        )
    try:
        return keras.saving.load_model(path, safe_mode=not unsafe)
    except Exception as error:  # a corrupt or foreign file
        # Keras' refusal of code (a Lambda's function) names the argument.
        if "safe_mode=False" in str(error):
            raise ExportError(
                f"cannot load {path} in safe mode: it holds Python code (such as a Lambda layer's function), "
                "which Keras runs only with safe_mode=False; if you trust the file, give --unsafe"
            ) from None
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ExportError(f"cannot load {path}: {reason}") from None


def _calibration(path):
    """A .npy array, or a .npz of arrays by input name."""
    data = np.load(path)
    return dict(data) if isinstance(data, np.lib.npyio.NpzFile) else data


def _export(args):
    model = _load(args.model, args.unsafe)
    if args.saved_model:
        written = export_saved_model(model, args.saved_model, dynamic_length=not args.fixed_length)
        print(f"wrote {args.saved_model} (endpoints: {', '.join(written)})")
    if args.tflite:
        summary = export_tflite(
            model,
            args.tflite,
            streaming=args.streaming,
            quantize=args.quantize,
            representative_data=_calibration(args.calibration) if args.calibration else None,
            dynamic_length=False if args.fixed_length else None,
            target=args.target,
            batch_size=args.batch_size,
            length=args.length,
            integer_io=False if args.float_io else None,
            runtime=args.runtime,
        )
        print(f"wrote {args.tflite} ({summary['size_bytes']:,} bytes, "
              f"signatures: {', '.join(summary['signatures'])})")
        if "micro" in summary:
            print(f"tflite-micro: runs in a tensor arena of {summary['micro']['arena_bytes']:,} bytes")
        if "accelerator" in summary:
            print("GPU / NPU delegate: static shapes, no loop"
                  + (", integers only" if summary["accelerator"]["integer_only"] else ""))
        if "initial_state" in summary:
            print(f"wrote {summary['initial_state']} (the step's initial states)")


def _inspect(args):
    content = tflite_inspect.read_flatbuffer(args.tflite)  # a ValueError naming the file and what is wrong
    try:
        summary = tflite_inspect.summarize(content)
    except Exception as error:
        raise ExportError(f"{args.tflite} is not a readable .tflite file: {error}") from None
    summary["positions"] = {key: micro_interpreter.io_order(content, key) for key in summary["signatures"]}
    summary["runtimes"] = tflite_inspect.runtime_verdicts(
        content,
        micro=micro_check.compatibility(content) if micro_probe.available() else None,
        accelerator=accelerator.compatibility(content),
    )
    print(tflite_inspect.format_summary(summary))


def run(args):
    """Runs the parsed command; returns the exit status."""
    try:
        (_export if args.command == "export" else _inspect)(args)
    except (ExportError, ValueError, OSError) as error:
        print(f"keras-relrec: error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0
