"""Per-series scaling: each series standardized by its own mean and scale,
and those two given beside it, for sets whose amplitudes differ by orders
of magnitude."""

from keras_relrec.layers.scaling.series_normalization import SeriesNormalization
from keras_relrec.layers.scaling.series_statistics import SeriesStatistics
