"""A loader for the FI-2010 limit-order-book benchmark's published files.

FI-2010 (Ntakaris, Magris, Kanniainen, Gabbouj and Iosifidis, "Benchmark
dataset for mid-price forecasting of limit order book data with machine
learning methods", Journal of Forecasting 37(8), 2018) holds ten trading
days of five Nasdaq Nordic stocks. Each published text file, e.g.
`Train_Dst_NoAuction_ZScore_CF_7.txt`, is a whitespace-separated matrix with
149 rows and one column per order-book event:

    rows 0–143    the 144 features; rows 0–39 are the raw order book, for
                  each level i = 1..10 in turn: ask price, ask volume,
                  bid price, bid volume (row 4(i − 1) + 0..3)
    rows 144–148  the labels at horizons k = 10, 20, 30, 50, 100 events:
                  1 up, 2 stationary, 3 down

The files come already normalised (`ZScore`, `MinMax` or `DecPre` in the
name); nothing is renormalised here. Nothing is downloaded: pass the paths
of files you have.

Anchored cross-validation: fold CF_k (k = 1..9) trains on the first k days
(`Train_..._CF_k.txt`) and tests on day k + 1 (`Test_..._CF_k.txt`). The
paper's Setup 2 — train on the first 7 days, test on the last 3 — is thus

    x, y = load_fi2010("Train_Dst_NoAuction_ZScore_CF_7.txt")
    x_test, y_test = load_fi2010(["Test_Dst_NoAuction_ZScore_CF_7.txt",
                                  "Test_Dst_NoAuction_ZScore_CF_8.txt",
                                  "Test_Dst_NoAuction_ZScore_CF_9.txt"])

with the default 40 raw features and windows of 10 events, as TABL (Tran
et al., 2019) reads it.
"""

import os

import numpy as np

HORIZONS = (10, 20, 30, 50, 100)
NUM_ROWS = 149
NUM_FEATURES = 144
CLASS_NAMES = ("up", "stationary", "down")


def load_fi2010(path, horizon=10, window=10, features=40):
    """Loads FI-2010 file(s) as windows of consecutive events.

    Args:
        path: A file path, or a list of paths whose events are joined in the
            order given (windows then run across the joins, as they already
            run across the day boundaries inside one multi-day file).
        horizon: Prediction horizon in events, one of 10, 20, 30, 50, 100.
        window: Positive int, events per window; at most the number of
            events.
        features: How many of the first feature rows to keep, 1..144;
            default the 40 raw order-book rows.

    Returns:
        `(x, y)`: `x` float32 (num_events − window + 1, window, features),
        Keras' (batch, time, features) layout, window j holding events
        j..j + window − 1; `y` int32 (num_windows,), the label of each
        window's last event at `horizon`, 0 up, 1 stationary, 2 down.
    """
    if horizon not in HORIZONS:
        raise ValueError(f"Argument `horizon` must be one of {HORIZONS}; received horizon={horizon!r}.")
    if not isinstance(window, (int, np.integer)) or isinstance(window, bool) or window < 1:
        raise ValueError(f"Argument `window` must be a positive integer; received window={window!r}.")
    if (not isinstance(features, (int, np.integer)) or isinstance(features, bool)
            or not 1 <= features <= NUM_FEATURES):
        raise ValueError(
            f"Argument `features` must be an integer in 1..{NUM_FEATURES}; received features={features!r}."
        )
    matrices = [_read(p, horizon, features) for p in _paths(path)]
    data = np.concatenate(matrices, axis=1)
    num_events = data.shape[1]
    if window > num_events:
        raise ValueError(
            f"Argument `window` must be at most the number of events, {num_events}; "
            f"received window={window}."
        )

    y = data[NUM_FEATURES + HORIZONS.index(horizon), window - 1:].astype(np.int32) - 1

    series = data[:features].T.astype(np.float32)  # (events, features)
    views = np.lib.stride_tricks.sliding_window_view(series, window, axis=0)  # (windows, features, window)
    x = np.ascontiguousarray(views.transpose(0, 2, 1))
    return x, y


def _paths(path):
    """The list of file paths `path` names, checked."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else path
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, (str, os.PathLike)) for p in paths):
        raise ValueError(
            "Argument `path` must be a file path or a list of file paths; received "
            f"path={path!r}."
        )
    if not paths:
        raise ValueError("Argument `path` must name at least one file; received an empty list.")
    return paths


def _read(path, horizon, features):
    """One file's (149, events) matrix; every problem names the file."""
    name = os.fspath(path)
    try:
        # ndmin=2 keeps a one-event file as a (149, 1) column.
        matrix = np.loadtxt(path, ndmin=2)
    except ValueError as error:
        raise ValueError(f"FI-2010 file {name!r} is not a matrix of numbers: {error}") from None
    if matrix.shape[0] != NUM_ROWS:
        raise ValueError(
            f"FI-2010 files have {NUM_ROWS} rows (144 features, 5 label rows); "
            f"{name!r} has {matrix.shape[0]}."
        )
    finite = np.isfinite(matrix[:features])
    if not finite.all():
        row, event = np.argwhere(~finite)[0]
        raise ValueError(
            f"FI-2010 file {name!r} has a feature that is not finite "
            f"({matrix[row, event]}) at row {row}, event {event}."
        )
    labels = matrix[NUM_FEATURES + HORIZONS.index(horizon)]
    if not np.all(np.isin(labels, (1, 2, 3))):
        bad = np.unique(labels[~np.isin(labels, (1, 2, 3))])[:5]
        raise ValueError(
            f"FI-2010 labels are 1, 2 or 3; the horizon-{horizon} row of {name!r} also "
            f"holds {bad.tolist()}."
        )
    return matrix
