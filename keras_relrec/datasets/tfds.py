"""Importing this module registers keras_relrec's TFDS builders (needs
`tensorflow-datasets`, extra `[datasets]`)."""

from keras_relrec.datasets.japanese_vowels_builder import JapaneseVowels  # noqa: F401
from keras_relrec.datasets.nth_farthest_builder import NthFarthest  # noqa: F401
