"""The `keras-relrec` command.

    keras-relrec export MODEL.keras --tflite OUT.tflite [--streaming]
                 [--quantize {float16,dynamic_int8,int8,int16x8} --calibration DATA.npy|DATA.npz]
                 [--saved-model DIR] [--fixed-length]
                 [--target {litert,micro,accelerator} --batch-size N --length T]
                 [--float-io] [--runtime VERSION] [--unsafe]
    keras-relrec inspect OUT.tflite
    keras-relrec demo [--tiny] [--output-dir DIR]     (the job of `make demo`)

Any failure exits with status 1 and one line on stderr saying why (for a
model that cannot be exported, the layer at fault).

This launcher lives beside the `keras_relrec` package, not in it: importing
anything from the package imports Keras and TensorFlow (seconds, and their
start-up log lines), which `--help`, a bad argument or a missing file do not
need. The commands themselves are `keras_relrec.export.cli`.
"""

import argparse
import contextlib
import os
import pathlib
import re
import sys
import tempfile

# What TensorFlow's native libraries write while they load, whatever
# TF_CPP_MIN_LOG_LEVEL says: absl's notice and INFO lines such as the oneDNN
# one, which CPUs with AVX-512 get and others do not.
_NATIVE_LOG_LINE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\)|I\d{4} )")


def _parser():
    parser = argparse.ArgumentParser(prog="keras-relrec", description=__doc__.splitlines()[0].strip("."))
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="export a .keras model")
    export.add_argument("model", help="a .keras file")
    export.add_argument("--tflite", help="write a builtins-only .tflite file here")
    export.add_argument("--saved-model", help="write a SavedModel folder here")
    export.add_argument("--streaming", action="store_true", help="TFLite step and initial_state signatures")
    export.add_argument("--quantize", choices=["float16", "dynamic_int8", "int8", "int16x8"])
    export.add_argument(
        "--calibration",
        help="for --quantize int8 or int16x8: a .npy array of input sequences, or a .npz of one array per input name",
    )
    export.add_argument("--fixed-length", action="store_true", help="keep the model's own time length")
    export.add_argument(
        "--target", choices=["litert", "micro", "accelerator"], default="litert",
        help="micro: TensorFlow Lite for Microcontrollers (fixed batch and length, the step alone, "
        "checked in the tflite-micro interpreter); accelerator: GPU / NPU delegates (fixed shapes, "
        "loops unrolled, with --quantize int8 integers throughout)",
    )
    export.add_argument("--batch-size", type=int, help="a fixed batch size (micro, accelerator: default 1)")
    export.add_argument(
        "--float-io", action="store_true",
        help="with --quantize int8 or int16x8 for micro or accelerator: float inputs, outputs and states",
    )
    export.add_argument("--runtime", help="the oldest TF Lite runtime the file must run in, e.g. 2.14")
    export.add_argument("--length", type=int, help="a fixed sequence length for the serve signature")
    export.add_argument(
        "--unsafe", action="store_true",
        help="load the model with safe_mode=False, for a file that holds Python code (a Lambda layer): "
        "that code runs, so give only files you trust",
    )
    inspect = commands.add_parser("inspect", help="describe a .tflite file")
    inspect.add_argument("tflite", help="a .tflite file")
    # Its arguments (--tiny, --output-dir DIR) are keras_relrec.demo's own.
    commands.add_parser("demo", help="train, save, export, reload and compare (keras_relrec.demo)")
    return parser


def _problem(args):
    """What is wrong with the arguments, found without TensorFlow, or None."""
    if args.command == "demo":
        return None
    if args.command == "inspect":
        return None if pathlib.Path(args.tflite).is_file() else f"no such file: {args.tflite}"
    if not args.tflite and not args.saved_model:
        return "nothing to do: give --tflite OUT.tflite and/or --saved-model DIR"
    if (args.quantize in ("int8", "int16x8")) != bool(args.calibration):
        return "--quantize int8 and int16x8 need --calibration DATA.npy, and only they do"
    if args.float_io and args.quantize not in ("int8", "int16x8"):
        return ("--float-io applies with --quantize int8 or int16x8 alone (float inputs, outputs and states where "
                "they would be integers); without them they are float already")
    for path in (args.model, args.calibration):
        if path and not pathlib.Path(path).is_file():
            return f"no such file: {path}"
    return None


def main(argv=None):
    parser = _parser()
    args, demo_args = parser.parse_known_args(argv)
    if demo_args and args.command != "demo":
        parser.error(f"unrecognized arguments: {' '.join(demo_args)}")
    problem = _problem(args)
    if problem is not None:
        print(f"keras-relrec: error: {problem}", file=sys.stderr)
        return 1
    # Before TensorFlow is imported: its start-up log lines stay quiet.
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.command == "demo":
        # Native libraries load all along the demo (TFLite, LiteRT): its
        # whole run, so that no log line breaks up the table.
        with _native_log_lines_dropped():
            from keras_relrec import demo

            demo.main(demo_args)
        return 0
    with _native_log_lines_dropped():
        from keras_relrec.export import cli

    return cli.run(args)


@contextlib.contextmanager
def _native_log_lines_dropped():
    """Holds back what is written to file descriptor 2 (native code
    included) and passes on every line but TensorFlow's load-time log."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            sys.stderr.write("".join(line for line in held if not _NATIVE_LOG_LINE.match(line)))


if __name__ == "__main__":
    sys.exit(main())
