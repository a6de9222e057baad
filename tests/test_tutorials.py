"""Every tutorial runs in its tiny configuration, so none can rot."""

import importlib.util
import json
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).parent.parent


def load_tutorial(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tutorials" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_timing_with_peepholes_tiny(tmp_path):
    tutorial = load_tutorial("timing_with_peepholes")
    results = tutorial.main(["--tiny", "--output-dir", str(tmp_path)])
    assert [r["model"] for r in results] == list(tutorial.MODELS)
    for r in results:
        assert r["mae_steps"] >= 0.0 and 0.0 <= r["exact"] <= 1.0
    # The coupled cell has three gate blocks to the LSTM's four.
    params = {r["model"]: r["params"] for r in results}
    assert params["CoupledLSTMCell + peepholes"] < params["LSTM"] < params["PeepholeLSTMCell"]
    assert (tmp_path / "timing_learning_curves.png").stat().st_size > 1000
    assert "| PeepholeLSTMCell |" in (tmp_path / "timing_results.md").read_text()


def test_deploy_to_device_tiny(tmp_path):
    tutorial = load_tutorial("deploy_to_device")
    rows = tutorial.main(["--tiny", "--output-dir", str(tmp_path)])
    names = [r["name"] for r in rows]
    assert names == [
        "Keras (float32, whole utterance per call)",
        "LiteRT float32, frame by frame",
        "LiteRT int8, frame by frame",
        "TFLM float32, frame by frame",
        "TFLM int8, integer I/O and states, frame by frame",
        "TFLM 16x8, int16 I/O and states, frame by frame",
    ]
    # Float32 streaming, in LiteRT and in TFLM, gives Keras' answers on
    # every utterance.
    for r in (rows[1], rows[3]):
        assert r["agree"] == 1.0 and r["accuracy"] == rows[0]["accuracy"], r
    for r in rows:
        assert r["bytes"] > 0 and r["us_per_frame"] > 0
    # The microcontroller files, with the arenas they run in.
    assert rows[3]["arena"] > 0 and rows[4]["arena"] > 0 and rows[5]["arena"] > 0
    assert set(rows[1]["overhead"]) == {"signature runner, a frame per call", "whole utterance per call"}
    drift = rows[5]["drift"]
    assert set(drift) == {"int8", "16x8"}
    for d in drift.values():
        assert 0 <= d["first_100"] <= d["max"] and 0 < d["agree"] <= 1
    # int16 activations and states are 256 times finer than int8 ones:
    # closer to float32 on average, early and late in the stream.
    for part in ("first_100", "last_100"):
        assert drift["16x8"][part] < drift["int8"][part], drift
    assert (tmp_path / "deploy_streaming.png").stat().st_size > 1000
    # The card gives every int8 tensor of the fully integer file its scale.
    card = json.loads((tmp_path / "deploy_card.json").read_text())
    step = card["speaker_micro_int8.tflite"]["quantization"]["step"]
    assert set(step["inputs"]) == set(step["outputs"]) - {"output"} | {"frames"}
    assert all(q["scale"] > 0 for side in step.values() for q in side.values())
    step16 = card["speaker_micro_int16x8.tflite"]["quantization"]["step"]
    assert set(step16["inputs"]) == set(step["inputs"]) and all(q["zero_point"] == 0 for q in step16["inputs"].values())
    text = (tmp_path / "deploy_results.md").read_text()
    assert "| TFLM int8, integer I/O and states, frame by frame |" in text and "over 1,000 frames" in text
    assert "| the same most likely speaker |" in text


def test_nth_farthest_rmc_tiny(tmp_path):
    tutorial = load_tutorial("nth_farthest_rmc")
    rows = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(tmp_path / "saved")])
    assert [r["model"] for r in rows] == ["RMC", "LSTM"]
    rmc, lstm = rows
    # The LSTM is sized to the RMC's recurrent weights.
    assert abs(lstm["recurrent_weights"] - rmc["recurrent_weights"]) < 0.2 * rmc["recurrent_weights"]
    for r in rows:
        assert 0.0 <= r["accuracy"] <= 1.0 and len(r["by_n"]) == 3 and r["examples"] >= 256
    for name in ("nth_farthest_curves.png", "nth_farthest_attention.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "| RMC |" in (tmp_path / "nth_farthest_results.md").read_text()
    saved = tmp_path / "saved"
    assert (saved / "nth_farthest_rmc.keras").is_file()
    assert (saved / "nth_farthest_rmc.tflite").is_file()
    assert (saved / "nth_farthest_rmc_savedmodel" / "saved_model.pb").is_file()
    card = json.loads((saved / "card.json").read_text())
    assert card["test_accuracy"] == rmc["accuracy"]
    assert card["task"] == {"num_objects": 3, "num_features": 1, "count_from": "nearest"}


def test_japanese_vowels_nbof_tiny(tmp_path):
    tutorial = load_tutorial("japanese_vowels_nbof")
    saved = tmp_path / "saved"
    results = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(saved)])
    assert [r["model"] for r in results] == list(tutorial.MODELS)
    for r in results:
        assert len(r["accuracies"]) == 2 and all(0.0 <= a <= 1.0 for a in r["accuracies"])
    for name in ("nbof_histograms.png", "nbof_temporal_attention.png"):
        assert (tmp_path / name).stat().st_size > 1000
    table = (tmp_path / "nbof_results.md").read_text()
    assert "| Attention NBoF |" in table and "(published)" in table
    card = json.loads((saved / "card.json").read_text())
    assert card["model"] in tutorial.BAG_OF_FEATURES
    assert (saved / "japanese_vowels_nbof.tflite").is_file()
    assert (saved / "japanese_vowels_nbof_savedmodel" / "saved_model.pb").is_file()


def test_lob_tabl_tiny(tmp_path):
    tutorial = load_tutorial("lob_tabl")
    saved = tmp_path / "saved"
    rows = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(saved)])
    assert [r["model"] for r in rows] == ["C(TABL)", "C(BL)"] * 2
    for r in rows:
        assert len(r["accuracy"]) == 2 and all(0.0 <= v <= 1.0 for v in r["accuracy"] + r["f1"])
        if r["model"] == "C(TABL)":
            assert all(0.0 <= v <= 1.0 for v in r["final_lambda"])
    for name in ("tabl_lambda.png", "tabl_attention.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "| C(TABL) |" in (tmp_path / "tabl_results.md").read_text()
    card = json.loads((saved / "card.json").read_text())
    assert card["model"] == "C(TABL)" and (saved / "lob_tabl.tflite").is_file()


def test_lob_tabl_reads_fi2010_files(tmp_path, capsys):
    """The FI-2010 path of the tutorial runs on files in the published layout."""
    rng = np.random.default_rng(0)
    for name, events in (("train.txt", 120), ("test.txt", 60)):
        matrix = np.vstack([rng.normal(size=(144, events)), rng.integers(1, 4, (5, events))])
        np.savetxt(tmp_path / name, matrix)
    tutorial = load_tutorial("lob_tabl")
    tutorial.main(["--fi2010-train", str(tmp_path / "train.txt"),
                   "--fi2010-test", str(tmp_path / "test.txt"), "--epochs", "1"])
    assert "FI-2010, horizon 10, C(TABL): accuracy" in capsys.readouterr().out


def test_char_lm_transformer_xl_tiny(tmp_path):
    tutorial = load_tutorial("char_lm_transformer_xl")
    saved = tmp_path / "saved"
    results = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(saved)])
    assert [r["model"] for r in results] == list(tutorial.MODELS)
    for r in results:
        assert len(r["curve"]) == 1 and 0 < r["test_bpc"] < 9
    weights = [r["weights"] for r in results]
    assert weights[0] == weights[1] and abs(weights[2] - weights[0]) / weights[0] < 0.1
    assert (tmp_path / "char_lm_curves.png").stat().st_size > 1000
    assert (tmp_path / "char_lm_sample.txt").read_text().startswith("def ")
    card = json.loads((saved / "card.json").read_text())
    assert card["mem_len"] == 8 and card["segment_len"] == 8 and 0 < card["snippet_bpc"] < 9
    for name in ("char_lm_transformer_xl.keras", "char_lm_transformer_xl.tflite",
                 "char_lm_transformer_xl_step.tflite", "char_lm_transformer_xl_savedmodel/saved_model.pb"):
        assert (saved / name).is_file()


def test_char_lm_with_the_segment_cache_tiny(tmp_path):
    tutorial = load_tutorial("char_lm_transformer_xl")
    (result,) = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--models", tutorial.CACHE])
    assert result["model"] == "Segment cache" and 0 < result["test_bpc"] < 9
    backbone = result["keras_model"].get_layer("backbone")
    assert backbone.top_k == 1 and backbone.num_slots == 8 and backbone.query == "causal"


def test_long_range_recall_tiny(tmp_path):
    tutorial = load_tutorial("long_range_recall")
    saved = tmp_path / "saved"
    rows = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(saved)])
    caches = ["cache (standard,dense)", "cache (compute_first,bilstm)"]
    assert [r["model"] for r in rows] == ["Transformer-XL, FIFO", *caches, "LSTM"]
    for r in rows:
        assert sorted(r["by_distance"]) == list(range(5)) and all(0 <= a <= 1 for a in r["by_distance"].values())
    for r in rows[1:-1]:
        assert len(r["recalled"]) == 3 and all(len(e["recalled"]) == 2 for e in r["recalled"])
        # k = N = 2 recalls both slots; the facts leave them once D + 1 > 2.
        assert sorted(r["facts_recalled"]) == list(range(5))
        assert r["facts_recalled"][0] == r["facts_recalled"][1] == 1 and r["facts_recalled"][2] == 0
    assert (tmp_path / "long_range_recall.png").stat().st_size > 1000
    card = json.loads((saved / "card.json").read_text())
    assert card["num_slots"] == 2 and 0 <= card["test_streams_accuracy"] <= 1
    assert card["command"] == "python tutorials/long_range_recall.py --tiny --save-dir savedmodels/long_range_recall"
    for name in ("long_range_recall_cache.keras", "long_range_recall_cache_step.tflite", "test_streams.npz"):
        assert (saved / name).is_file()


def test_sequential_digits_rtransformer_tiny(tmp_path):
    tutorial = load_tutorial("sequential_digits_rtransformer")
    saved = tmp_path / "saved"
    rows, runs = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(saved)])
    assert [r["model"] for r in rows] == list(tutorial.MODELS)
    weights = [r["weights"] for r in rows]
    # The baselines are widened to R-Transformer's weight count.
    assert max(weights) / min(weights) < 1.15
    for r in runs:
        assert len(r["curve"]) == 1 and 0 <= r["test_accuracy"] <= 1
    assert (tmp_path / "sequential_digits_rtransformer.png").stat().st_size > 1000
    assert "| R-Transformer |" in (tmp_path / "sequential_digits_rtransformer.md").read_text()
    card = json.loads((saved / "card.json").read_text())
    assert card["command"] == (
        "python tutorials/sequential_digits_rtransformer.py --tiny --save-dir savedmodels/sequential_digits"
    )
    for name in ("sequential_digits_rtransformer.keras", "sequential_digits_rtransformer.tflite", "test_digits.npz"):
        assert (saved / name).is_file()
    # The shipped digits are what the model takes, (batch, 64, 1).
    assert np.load(saved / "test_digits.npz")["pixels"].shape[1:] == (64, 1)


def test_basic_motions_drrt_tiny(tmp_path):
    tutorial = load_tutorial("basic_motions_drrt")
    saved = tmp_path / "saved"
    rows, runs = tutorial.main(["--tiny", "--output-dir", str(tmp_path), "--save-dir", str(saved)])
    assert [r["model"] for r in rows] == list(tutorial.MODELS)
    for r in runs:
        assert 0 <= r["test_accuracy"] <= 1 and r["weights"] > 0
    assert (tmp_path / "basic_motions_relation_maps.png").stat().st_size > 1000
    assert "| DRRT (sum) |" in (tmp_path / "basic_motions_drrt.md").read_text()
    card = json.loads((saved / "card.json").read_text())
    assert card["command"] == "python tutorials/basic_motions_drrt.py --tiny --save-dir savedmodels/basic_motions"
    for name in ("basic_motions_drrt.keras", "basic_motions_drrt.tflite", "test_recordings.npz"):
        assert (saved / name).is_file()


def test_tune_japanese_vowels_nbof_tiny(tmp_path):
    tutorial = load_tutorial("tune_japanese_vowels_nbof")
    result = tutorial.main(["--tiny", "--output-dir", str(tmp_path)])
    assert [r["trial"] for r in result["rows"]] == [1, 2]
    assert all(0.0 <= r["val_accuracy"] <= 1.0 for r in result["rows"])
    assert result["agreement"] < 1e-4
    assert 0.0 <= result["test_accuracy"] <= 1.0
    assert (tmp_path / "tuning_trials.png").stat().st_size > 1000
    assert (tmp_path / "best_nbof.tflite").stat().st_size > 1000
    assert "Best (trial" in (tmp_path / "tuning_results.md").read_text()
