"""The devices a TFLite file is exported for, one object each.

A `Target` says what the file fixes (a batch and, in sequence mode, a
length), how the recurrent loops are traced (a WHILE, or unrolled), and
what is checked of the converted file before it is written. `export_tflite`
reads: validate → plan → trace → convert → `target.check` → write.
"""

import contextlib

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.tflite import accelerator
from keras_relrec.export.tflite import micro_check
from keras_relrec.ops import micro_forms


class Target:
    """LiteRT on phones and desktops: dynamic shapes, every signature, the
    loops as WHILE.

    Attributes:
        name: The name `export_tflite(target=...)` takes.
        fixed: Whether the file has a fixed batch (default 1) and, in
            sequence mode, a fixed length; a streaming file then has `step`
            as its only signature, its initial states beside it.
        unroll: Whether the recurrent loops of a fixed length are traced
            as one step per time step (no WHILE).
    """

    name = "litert"
    fixed = False
    unroll = False

    def tracing(self):
        """The context the model is traced and converted in: the ops the
        layers choose where the target's runtime lacks some."""
        return contextlib.nullcontext()

    def check(self, content, plan, integer_io):
        """Checks the converted file `content` (bytes) of the model of
        `plan` (its `ExportPlan`, which names a layer at fault) for the
        target; `integer_io`: whether the file is to be fully integer.

        Returns:
            What the export's summary gains (a dict).

        Raises:
            ExportError: the file does not run on the target; the message
                names the layer at fault.
        """
        del content, plan, integer_io  # LiteRT runs what the converter writes
        return {}


class MicroTarget(Target):
    """TensorFlow Lite for Microcontrollers: fixed shapes, one subgraph to
    run; the file is run once in the installed tflite-micro interpreter."""

    name = "micro"
    fixed = True

    def tracing(self):
        return micro_forms.tracing()

    def check(self, content, plan, integer_io):
        del integer_io
        return {"micro": micro_check.check(content, plan)}


class AcceleratorTarget(Target):
    """GPU and NPU delegates, which take a file whole: fixed shapes, no
    loop, integers throughout for an integer file."""

    name = "accelerator"
    fixed = True
    unroll = True

    def check(self, content, plan, integer_io):
        found = accelerator.compatibility(content)
        if not found["ready"]:
            where = plan.culprit(" ".join(found["tensors"]))
            raise ExportError(f"{where} does not export for accelerators: {found['reasons'][0]}")
        if integer_io and not found["integer_only"]:
            where = plan.culprit(" ".join(found["float_tensors"]))
            raise ExportError(f"{where} keeps float tensors in the integer file (e.g. '{found['float_tensors'][0]}'), "
                              "which an integer-only accelerator cannot run")
        return {"accelerator": found}


TARGETS = {target.name: target for target in (Target(), MicroTarget(), AcceleratorTarget())}
