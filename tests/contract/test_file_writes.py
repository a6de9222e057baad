"""Class check: every file the package writes is written atomically. For
each writer (`file_writer_worker.WRITERS`), over an existing good file, a
child that writes is killed (SIGKILL) at random moments of its write; after
each kill the target holds exactly the old version or exactly the new one,
never a partial file or a mix, and whatever the writer left behind is
hidden beside it, not under the target's name. Given an existing path of
the other kind at its targets (a folder where it writes a file, a file
where it writes a folder), each writer fails and leaves them as they were.

The one state between old and new that two files cannot avoid (two
renames are two steps): an export killed between them leaves the old
`.tflite` with the new `.npz`; the reader must refuse it (see
`keras_relrec.utils.atomic_files`).
"""

import hashlib
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
import zipfile

import pytest

from tests.contract import file_writer_worker

# A minute and more of conversions: in `make check`.
pytestmark = pytest.mark.check

ROOT = pathlib.Path(__file__).parent.parent.parent
KILLS = 4


@pytest.fixture(scope="module")
def worker():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, file_writer_worker.__file__], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
    assert _next(process, ("ready",))[0] == "ready"
    yield process
    process.kill()
    process.wait()


def _next(process, kinds):
    """The next line of the worker of one of `kinds` (other lines are the
    writers' own output), split into words."""
    while True:
        line = process.stdout.readline()
        assert line, "the writer process ended"
        words = line.split()
        if words and words[0] in kinds:
            return words


def _write(worker, writer, folder, version, kill_after=None, fails=False):
    """Runs `writer`; with `kill_after`, kills it that many seconds after it
    opened its file; with `fails`, it must fail. Returns whether it wrote
    through `atomic_files`, and the seconds from there to its end."""
    worker.stdin.write(json.dumps({"writer": writer, "folder": str(folder), "version": version}) + "\n")
    entered, status = None, None
    while status is None:
        words = _next(worker, ("entered", "exit"))
        if words[0] == "entered" and entered is None:
            entered = time.perf_counter()
            if kill_after is not None:
                time.sleep(kill_after)
                try:
                    os.kill(int(words[1]), signal.SIGKILL)
                except ProcessLookupError:  # it finished first
                    pass
        elif words[0] == "exit":
            status = int(words[1])
    if kill_after is None:
        assert (status != 0) == fails, f"{writer} {'succeeded' if status == 0 else 'failed'}"
    return entered is not None, time.perf_counter() - (entered or 0)


def _fingerprint(path):
    """What a version of a target is; raises on a partial file. The parts a
    writer stamps with the time (a zip's dates, Keras' metadata.json, a
    SavedModel's bytes) are left out, and the addresses Keras writes as
    shared objects' ids numbered."""
    if not path.exists():
        return None
    if path.is_dir():
        # A SavedModel's bytes vary from save to save: its files and its
        # variables' values (reading them fails on a partial checkpoint).
        # Keras numbers the variables its functions use (`_all_variables/i`)
        # in the order the traced graphs capture them, which varies from
        # save to save of one model: the values count, not their names.
        import tensorflow as tf

        reader = tf.train.load_checkpoint(str(path / "variables" / "variables"))
        values = sorted(hashlib.sha256(reader.get_tensor(name).tobytes()).hexdigest()
                        for name in reader.get_variable_to_shape_map() if not name.startswith("_CHECKPOINTABLE"))
        return sorted(str(file.relative_to(path)) for file in path.rglob("*") if file.is_file()), values
    if path.suffix in (".keras", ".npz"):
        with zipfile.ZipFile(path) as archive:
            return {name: file_writer_worker.shared_objects_numbered(archive.read(name)) if name == "config.json"
                    else hashlib.sha256(archive.read(name)).hexdigest()
                    for name in archive.namelist() if name != "metadata.json"}
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _state(folder, targets):
    return [_fingerprint(folder / target) for target in targets]


@pytest.mark.parametrize("writer", list(file_writer_worker.WRITERS))
def test_a_killed_writer_leaves_the_old_file_or_the_new(worker, writer, tmp_path):
    targets = file_writer_worker.WRITERS[writer][0]
    versions = {}
    for version in ("new", "old"):  # the old one last, over the new: as the trials write
        atomic, seconds = _write(worker, writer, tmp_path, version)
        assert atomic, f"{writer} does not write through keras_relrec.utils.atomic_files"
        versions[version] = _state(tmp_path, targets)
    assert versions["old"] != versions["new"]
    rng = random.Random(0)
    current = "old"
    for _ in range(KILLS):
        other = "new" if current == "old" else "old"
        _write(worker, writer, tmp_path, other, kill_after=rng.uniform(0, 1.3 * seconds))
        state = _state(tmp_path, targets)
        if state == versions[other]:
            current = other
        elif state != versions[current]:
            # Only the pair's in-between state, which its reader refuses.
            from keras_relrec.export import micro

            assert len(targets) == 2 and state == [versions[current][0], versions[other][1]], (writer, state)
            with pytest.raises(ValueError, match="another version"):
                micro.read_initial_state(tmp_path / targets[0])
            _write(worker, writer, tmp_path, current)
        visible = {path.name for path in tmp_path.iterdir() if not path.name.startswith(".")}
        assert visible <= set(targets) | {"input_old.keras", "input_new.keras"}, visible


@pytest.mark.parametrize("writer", list(file_writer_worker.WRITERS))
def test_a_target_of_the_other_kind_is_refused_untouched(worker, writer, tmp_path):
    """A writer never replaces a folder by a file or a file by a folder
    (the swap would delete it): it fails, and what was there stays."""
    targets = file_writer_worker.WRITERS[writer][0]
    for target in targets:
        if file_writer_worker.is_folder(target):
            (tmp_path / target).write_text("mine")
        else:
            (tmp_path / target).mkdir()
            (tmp_path / target / "mine.txt").write_text("mine")
    before = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    _write(worker, writer, tmp_path, "new", fails=True)
    after = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")
                   if not path.name.startswith("input_"))  # the command's input
    assert after == before
    for target in targets:
        kept = tmp_path / target if file_writer_worker.is_folder(target) else tmp_path / target / "mine.txt"
        assert kept.read_text() == "mine"
