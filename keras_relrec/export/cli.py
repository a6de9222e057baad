"""The `keras-relrec` command.

    keras-relrec export MODEL.keras --tflite OUT.tflite [--streaming]
                 [--quantize {float16,dynamic_int8,int8} --calibration DATA.npy]
                 [--saved-model DIR] [--fixed-length]
    keras-relrec inspect OUT.tflite

Any failure exits with status 1 and one line on stderr saying why (for a
model that cannot be exported, the layer at fault).
"""

import argparse
import os
import pathlib
import sys

from keras_relrec.export.export_error import ExportError


def _parser():
    parser = argparse.ArgumentParser(prog="keras-relrec", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="export a .keras model")
    export.add_argument("model", help="a .keras file")
    export.add_argument("--tflite", help="write a builtins-only .tflite file here")
    export.add_argument("--saved-model", help="write a SavedModel folder here")
    export.add_argument("--streaming", action="store_true", help="TFLite step and initial_state signatures")
    export.add_argument("--quantize", choices=["float16", "dynamic_int8", "int8"])
    export.add_argument("--calibration", help="a .npy array of input sequences, for --quantize int8")
    export.add_argument("--fixed-length", action="store_true", help="keep the model's own time length")
    inspect = commands.add_parser("inspect", help="describe a .tflite file")
    inspect.add_argument("tflite", help="a .tflite file")
    return parser


def _load(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise ExportError(f"no such file: {path}")
    import keras

    import keras_relrec  # noqa: F401  (registers the layers)

    try:
        return keras.saving.load_model(path, safe_mode=True)
    except Exception as error:  # a corrupt or foreign file
        reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ExportError(f"cannot load {path}: {reason}") from None


def _export(args):
    if not args.tflite and not args.saved_model:
        raise ExportError("nothing to do: give --tflite OUT.tflite and/or --saved-model DIR")
    if (args.quantize == "int8") != bool(args.calibration):
        raise ExportError("--quantize int8 needs --calibration DATA.npy, and only it does")
    model = _load(args.model)
    from keras_relrec import export

    if args.saved_model:
        written = export.export_saved_model(
            model, args.saved_model, dynamic_length=not args.fixed_length
        )
        print(f"wrote {args.saved_model} (endpoints: {', '.join(written)})")
    if args.tflite:
        import numpy as np

        data = np.load(args.calibration) if args.calibration else None
        summary = export.export_tflite(
            model,
            args.tflite,
            streaming=args.streaming,
            quantize=args.quantize,
            representative_data=data,
            dynamic_length=not args.fixed_length,
        )
        print(f"wrote {args.tflite} ({summary['size_bytes']:,} bytes, "
              f"signatures: {', '.join(summary['signatures'])})")


def _inspect(args):
    path = pathlib.Path(args.tflite)
    if not path.is_file():
        raise ExportError(f"no such file: {path}")
    from keras_relrec.export import tflite_inspect

    try:
        summary = tflite_inspect.summarize(path)
    except Exception as error:
        raise ExportError(f"{path} is not a readable .tflite file: {error}") from None
    print(tflite_inspect.format_summary(summary))


def main(argv=None):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    try:
        (_export if args.command == "export" else _inspect)(args)
    except (ExportError, ValueError, OSError) as error:
        print(f"keras-relrec: error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
