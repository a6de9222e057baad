"""`atomic_files`: a temporary path beside the target, replaced onto it on
success and removed on failure; folders swapped whole; a group replaced in
order; and the `.tflite` / `.initial_state.npz` pair's fingerprint."""

import os

import numpy as np
import pytest

from keras_relrec.export import micro
from keras_relrec.export.tflite import initial_state_file
from keras_relrec.utils import atomic_files


def test_a_file_is_replaced_from_a_hidden_temporary_beside_it(tmp_path):
    target = tmp_path / "model.keras"
    target.write_text("old")
    with atomic_files.replacing(target) as temp:
        assert temp.parent == tmp_path and temp.name.startswith(".model.keras.") and temp.suffix == ".keras"
        temp.write_text("new")
        assert target.read_text() == "old"  # nothing visible until the body returns
    assert target.read_text() == "new"
    assert os.listdir(tmp_path) == ["model.keras"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "card.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_files.replacing(target) as temp:
        temp.write_text("half")
        raise RuntimeError
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["card.json"]


def test_write_text_and_write_bytes(tmp_path):
    atomic_files.write_text(tmp_path / "a.md", "text")
    atomic_files.write_bytes(tmp_path / "b.tflite", b"\x00\x01")
    assert (tmp_path / "a.md").read_text() == "text" and (tmp_path / "b.tflite").read_bytes() == b"\x00\x01"


def test_a_group_is_replaced_in_the_order_given(tmp_path, monkeypatch):
    done = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: (done.append(target.name), replace(source, target)))
    with atomic_files.replacing(tmp_path / "m.initial_state.npz", tmp_path / "m.tflite") as (first, second):
        first.write_text("states")
        second.write_text("file")
    assert done == ["m.initial_state.npz", "m.tflite"]
    assert sorted(os.listdir(tmp_path)) == ["m.initial_state.npz", "m.tflite"]


@pytest.mark.parametrize("exchange", [True, False], ids=["exchanged", "renamed away"])
def test_a_folder_is_swapped_in_whole(tmp_path, monkeypatch, exchange):
    if not exchange:  # a system without renameat2's exchange
        monkeypatch.setattr(atomic_files, "_exchange", lambda first, second: False)
    target = tmp_path / "saved"
    for content in ("old", "new"):
        with atomic_files.replacing(target) as temp:
            (temp / "variables").mkdir(parents=True)
            (temp / "variables" / "data").write_text(content)
            (temp / content).write_text(content)
        assert sorted(p.name for p in target.rglob("*")) == sorted(["variables", "data", content])
        assert (target / "variables" / "data").read_text() == content
    assert os.listdir(tmp_path) == ["saved"]


@pytest.mark.parametrize("exchange", [True, False], ids=["exchanged", "renamed away"])
def test_a_file_and_a_folder_never_replace_each_other(tmp_path, monkeypatch, exchange):
    """What is there stays, and the temporary goes: the exchange of a
    folder with a file would delete the file, a folder's mode would be a
    file's."""
    if not exchange:
        monkeypatch.setattr(atomic_files, "_exchange", lambda first, second: False)
    (tmp_path / "a_file").write_text("mine")
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_folder" / "mine.txt").write_text("mine")
    with pytest.raises(NotADirectoryError, match="a file is there.*a_file"), \
            atomic_files.replacing(tmp_path / "a_file") as temp:
        temp.mkdir()
        (temp / "saved_model.pb").write_text("new")
    with pytest.raises(IsADirectoryError, match="a folder is there.*a_folder"), \
            atomic_files.replacing(tmp_path / "other.tflite", tmp_path / "a_folder") as (first, second):
        first.write_text("new")
        second.write_text("new")
    assert sorted(os.listdir(tmp_path)) == ["a_file", "a_folder"]  # neither the first of the group
    assert (tmp_path / "a_file").read_text() == "mine" and os.listdir(tmp_path / "a_folder") == ["mine.txt"]


def test_nothing_to_replace_is_refused():
    with pytest.raises(ValueError, match="`paths`"), atomic_files.replacing():
        pass


def test_the_states_belong_to_their_tflite_file(tmp_path):
    path = tmp_path / "s.tflite"
    states = {"state": np.zeros((1, 4), "float32")}
    sidecar = initial_state_file.write_initial_state(path, b"file one", states, 5)
    assert sidecar == micro.initial_state_path(path) and path.read_bytes() == b"file one"
    read, chunk = micro.read_initial_state(path)
    assert list(read) == ["state"] and chunk == 5
    # The old .tflite beside the new .npz: an export killed between its renames.
    path.write_bytes(b"file two")
    with pytest.raises(ValueError, match=r"Argument `path`.*another version"):
        micro.read_initial_state(path)
    # Bytes already read are what is checked: the file as it will run.
    assert list(micro.read_initial_state(path, b"file one")[0]) == ["state"]
    with pytest.raises(ValueError, match=r"Argument `path`.*another version"):
        micro.read_initial_state(path, b"file two")
    # A .npz of an older export has no fingerprint: taken as it is.
    np.savez(sidecar, **states)
    assert list(micro.read_initial_state(path)[0]) == ["state"]


def test_a_link_replaces_its_file_and_a_private_file_stays_private(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    atomic_files.write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o600


def test_a_missing_folder_is_named_not_the_temporary(tmp_path):
    with pytest.raises(FileNotFoundError, match="no folder to write into") as info:
        atomic_files.write_text(tmp_path / "missing" / "card.json", "text")
    assert info.value.filename == str(tmp_path / "missing")
    (tmp_path / "a_file").write_text("")
    with pytest.raises(NotADirectoryError) as info:
        atomic_files.write_text(tmp_path / "a_file" / "card.json", "text")
    assert info.value.filename == str(tmp_path / "a_file")
