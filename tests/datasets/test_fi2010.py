"""The FI-2010 loader on small files written in the published layout, where
feature row r of event c holds r + c/1000 and the label row of horizon index
h holds 1 + (c + h) mod 3."""

import numpy as np
import pytest

from keras_relrec.datasets import load_fi2010
from keras_relrec.datasets.fi2010 import HORIZONS

NUM_EVENTS = 30


def fi2010_matrix(events):
    """The 149 × len(events) matrix of the events with these global indices."""
    c = np.asarray(events, np.float64)
    features = np.arange(144.0)[:, None] + c / 1000
    labels = 1 + (c.astype(int) + np.arange(5)[:, None]) % 3
    return np.concatenate([features, labels])


def write(path, matrix):
    np.savetxt(path, matrix, fmt="%.7e")  # the published files' format
    return path


@pytest.fixture
def fi2010_file(tmp_path):
    return write(tmp_path / "Train_Dst_NoAuction_ZScore_CF_1.txt", fi2010_matrix(range(NUM_EVENTS)))


def test_windows_are_transposed_slices_of_the_feature_rows(fi2010_file):
    x, y = load_fi2010(fi2010_file)
    assert x.shape == (NUM_EVENTS - 9, 10, 40) and x.dtype == np.float32
    assert y.shape == (NUM_EVENTS - 9,) and y.dtype == np.int32
    features = fi2010_matrix(range(NUM_EVENTS))[:40]
    for k in range(len(x)):
        np.testing.assert_allclose(x[k], features[:, k:k + 10].T, rtol=1e-6)
    # Spot check of the layout: step 2 of window 5 is event 7; feature 3 is row 3.
    assert x[5, 2, 3] == pytest.approx(3.007)

    x, _ = load_fi2010(fi2010_file, window=1, features=144)
    assert x.shape == (NUM_EVENTS, 1, 144)
    np.testing.assert_allclose(x[:, 0], fi2010_matrix(range(NUM_EVENTS))[:144].T, rtol=1e-6)


@pytest.mark.parametrize("h", range(5))
def test_labels_are_the_last_events_at_the_horizon_mapped_to_0_1_2(fi2010_file, h):
    window = 4
    _, y = load_fi2010(fi2010_file, horizon=HORIZONS[h], window=window)
    last = np.arange(window - 1, NUM_EVENTS)
    published = 1 + (last + h) % 3  # 1 up, 2 stationary, 3 down
    np.testing.assert_array_equal(y, published - 1)
    assert set(np.unique(y)) == {0, 1, 2}


def test_a_list_of_paths_joins_the_events_in_order(tmp_path, fi2010_file):
    first = write(tmp_path / "Test_CF_7.txt", fi2010_matrix(range(0, 12)))
    second = write(tmp_path / "Test_CF_8.txt", fi2010_matrix(range(12, 13)))  # one event
    third = write(tmp_path / "Test_CF_9.txt", fi2010_matrix(range(13, NUM_EVENTS)))
    x, y = load_fi2010([first, str(second), third], horizon=50, window=5)
    x_whole, y_whole = load_fi2010(fi2010_file, horizon=50, window=5)
    np.testing.assert_array_equal(x, x_whole)
    np.testing.assert_array_equal(y, y_whole)


def test_bad_arguments_and_files(tmp_path, fi2010_file):
    with pytest.raises(ValueError, match="horizon"):
        load_fi2010(fi2010_file, horizon=15)
    with pytest.raises(ValueError, match=f"window.*{NUM_EVENTS}"):
        load_fi2010(fi2010_file, window=NUM_EVENTS + 1)
    load_fi2010(fi2010_file, window=NUM_EVENTS)  # exactly one window is fine
    with pytest.raises(ValueError, match="window"):
        load_fi2010(fi2010_file, window=0)
    for features in (0, 145):
        with pytest.raises(ValueError, match="features"):
            load_fi2010(fi2010_file, features=features)
    with pytest.raises(ValueError, match="path"):
        load_fi2010([])
    short = write(tmp_path / "short.txt", fi2010_matrix(range(NUM_EVENTS))[:148])
    with pytest.raises(ValueError, match="149 rows.*has 148"):
        load_fi2010(short)
    bad_labels = fi2010_matrix(range(NUM_EVENTS))
    bad_labels[144, 20] = 0
    with pytest.raises(ValueError, match="labels"):
        load_fi2010(write(tmp_path / "bad.txt", bad_labels))


def test_every_file_error_names_the_file(tmp_path, fi2010_file):
    """With a list of files, the message says which file is at fault: a
    missing one, one that is not a number matrix, bad labels, or features
    that are not finite (accepted silently before)."""
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_fi2010([fi2010_file, missing])
    garbled = tmp_path / "garbled.txt"
    garbled.write_text("1 2 three\n")
    with pytest.raises(ValueError, match="garbled.txt"):
        load_fi2010([fi2010_file, garbled])
    bad_labels = fi2010_matrix(range(NUM_EVENTS))
    bad_labels[144, 20] = 0
    with pytest.raises(ValueError, match="labels.*bad_labels.txt"):
        load_fi2010([fi2010_file, write(tmp_path / "bad_labels.txt", bad_labels)])
    for value in (np.nan, np.inf):
        bad_features = fi2010_matrix(range(NUM_EVENTS))
        bad_features[3, 7] = value
        with pytest.raises(ValueError, match=r"nan_or_inf.txt.*not finite.*row 3, event 7"):
            load_fi2010([fi2010_file, write(tmp_path / "nan_or_inf.txt", bad_features)])


@pytest.mark.parametrize("path", [None, 3, b"bytes.txt", [None]])
def test_path_must_be_a_path_or_a_list_of_paths(path):
    with pytest.raises(ValueError, match="path"):
        load_fi2010(path)
