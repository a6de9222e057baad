"""Data sets that work offline: loaders for data shipped in PyPI wheels."""

from keras_relrec.datasets.japanese_vowels import load_japanese_vowels
from keras_relrec.datasets.nth_farthest import nth_farthest
