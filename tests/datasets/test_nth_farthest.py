"""The Nth-farthest generator against a brute-force NumPy reading of each
example, and the TFDS builder, offline."""

import numpy as np
import pytest

from keras_relrec.datasets import nth_farthest


def decode(rows, num_objects, num_features):
    """Vectors by id, n and m, read back from one example's shuffled rows."""
    f = num_features
    ids = rows[:, f:f + num_objects].argmax(-1)
    vectors = np.empty((num_objects, f))
    vectors[ids] = rows[:, :f]
    n = rows[0, f + num_objects:f + 2 * num_objects].argmax()
    m = rows[0, f + 2 * num_objects:].argmax()
    return vectors, n, m


@pytest.mark.parametrize("count_from", ["nearest", "farthest"])
@pytest.mark.parametrize("shape", [(8, 16), (4, 4)])
def test_labels_are_the_nth_by_distance(count_from, shape):
    objects, features = shape
    x, y = nth_farthest(300, objects, features, seed=5, count_from=count_from)
    assert x.shape == (300, objects, features + 3 * objects) and x.dtype == np.float32
    for rows, label in zip(x, y):
        vectors, n, m = decode(rows, objects, features)
        distances = [np.linalg.norm(vectors[j] - vectors[m]) for j in range(objects)]
        ranked = sorted(range(objects), key=lambda j: distances[j], reverse=count_from == "farthest")
        assert label == ranked[n]
        assert np.all(np.abs(vectors) <= 1)
    # n = 0 counted from the nearest is vector m itself, as in the reference.
    if count_from == "nearest":
        for rows, label in zip(x, y):
            _, n, m = decode(rows, objects, features)
            if n == 0:
                assert label == m


def test_rows_are_shuffled_and_generation_is_seeded():
    x, y = nth_farthest(200, 4, 4, seed=1)
    ids = x[:, :, 4:8].argmax(-1)
    assert not np.all(ids == np.arange(4)), "rows must not come in id order"
    x2, y2 = nth_farthest(200, 4, 4, seed=1)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert np.bincount(y, minlength=4).min() > 20


def test_bad_arguments():
    with pytest.raises(ValueError, match="count_from"):
        nth_farthest(2, count_from="middle")
    with pytest.raises(ValueError, match="num_objects"):
        nth_farthest(2, num_objects=0)


def test_tfds_builder_generates_offline(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    import keras_relrec.datasets.tfds  # noqa: F401
    from keras_relrec.datasets import nth_farthest_builder

    monkeypatch.setattr(nth_farthest_builder, "SPLITS", {"train": (30, 0), "test": (20, 2)})
    builder = tfds.builder("nth_farthest/reduced", data_dir=str(tmp_path))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    train = list(tfds.as_numpy(builder.as_dataset(split="train", as_supervised=True)))
    assert len(train) == 30
    assert builder.info.features["label"].num_classes == 4
    x, y = nth_farthest(30, 4, 4, seed=(0, 0))
    got = {tuple(rows.ravel()): label for rows, label in train}
    for rows, label in zip(x, y):
        assert got[tuple(rows.ravel())] == label
    assert "paper" in [c.name for c in nth_farthest_builder.NthFarthest.BUILDER_CONFIGS]


@pytest.mark.parametrize("name", ["num_examples", "num_objects", "num_features"])
@pytest.mark.parametrize("value", [True, 2.0, 0, "3"])
def test_sizes_must_be_positive_ints(name, value):
    with pytest.raises(ValueError, match=f"`{name}`"):
        nth_farthest(**{"num_examples": 4, name: value})


@pytest.mark.parametrize("seed", [-1, 1.5, "seven", True, [1, -2]])
def test_a_bad_seed_is_named(seed):
    with pytest.raises(ValueError, match="`seed`"):
        nth_farthest(4, seed=seed)


def test_seeds_numpy_takes_still_work():
    for seed in (0, (1, 2), np.int64(3), None):
        nth_farthest(2, num_objects=3, num_features=2, seed=seed)
