"""What the cards of trained models (savedmodels/) share."""

import json

from keras_relrec.utils import atomic_files


def reproduce_command(script, argv, save_dir, folder_options=("--output-dir", "--save-dir")):
    """The command that made a model: `python <script> <argv>` with the
    folders it was given (`folder_options`, in both `--opt value` and
    `--opt=value` forms) replaced by the repository's `save_dir`, so that a
    card names no machine's paths."""
    kept, words = [], iter(argv)
    for word in words:
        if word in folder_options:
            next(words, None)  # its value
        elif word.split("=")[0] not in folder_options:
            kept.append(word)
    return " ".join(["python", script, *kept, "--save-dir", save_dir])


def write_card(path, card):
    """Writes the card (a dict) as indented JSON to `path`, atomically: a
    card never describes half a run."""
    atomic_files.write_text(path, json.dumps(card, indent=2) + "\n")
