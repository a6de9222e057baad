import numpy as np
import pytest

from keras_relrec.datasets import load_japanese_vowels


def test_splits_padding_and_labels():
    x, y, lengths = load_japanese_vowels("train")
    assert x.shape == (270, 26, 12) and x.dtype == np.float32
    assert set(np.unique(y)) == set(range(9))
    assert lengths.min() == 7 and lengths.max() == 26
    for frames, n in zip(x, lengths):
        # Real frames first, none of them all zeros; zeros after.
        assert np.all(np.abs(frames[:n]).sum(-1) > 0)
        assert np.all(frames[n:] == 0)
    x_test, _, _ = load_japanese_vowels("test", max_length=40)
    assert x_test.shape == (370, 40, 12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        load_japanese_vowels("validation")
    with pytest.raises(ValueError, match="max_length must be at least 26|`max_length` must be at least 26"):
        load_japanese_vowels("train", max_length=10)


def test_tfds_builder_reads_the_local_files(tmp_path):
    import tensorflow_datasets as tfds

    import keras_relrec.datasets.tfds  # noqa: F401

    builder = tfds.builder("japanese_vowels", data_dir=str(tmp_path))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )
    assert builder.info.features["label"].num_classes == 9
    for split, count in (("train", 270), ("test", 370)):
        x, y, lengths = load_japanese_vowels(split, max_length=29)
        examples = sorted(
            tfds.as_numpy(builder.as_dataset(split=split)),
            key=lambda e: (int(e["label"]), int(e["length"]), float(e["series"].sum())),
        )
        assert len(examples) == count
        order = sorted(range(count), key=lambda k: (int(y[k]), int(lengths[k]), float(x[k].sum())))
        for example, k in zip(examples, order):
            np.testing.assert_array_equal(example["series"], x[k])
            assert example["length"] == lengths[k] and example["label"] == y[k]
