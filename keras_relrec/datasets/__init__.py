"""Data sets that work offline: loaders for data shipped in PyPI wheels or
already on disk (FI-2010), and generators (Nth-farthest, order books, shapes by class)."""

from keras_relrec.datasets.basic_motions import load_basic_motions
from keras_relrec.datasets.fi2010 import load_fi2010
from keras_relrec.datasets.japanese_vowels import load_japanese_vowels
from keras_relrec.datasets.nth_farthest import nth_farthest
from keras_relrec.datasets.shape_classes import shape_classes
from keras_relrec.datasets.synthetic_lob import synthetic_lob
from keras_relrec.datasets.ucr_uea import load_ucr_uea
