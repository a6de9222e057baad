"""`make demo`'s job (in `make check`) and every benchmark script in its
quick mode (`make test-slow`: benchmarks are slow work), so that neither
can rot."""

import os
import pathlib
import re
import runpy
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent


def test_make_demo_prints_its_table_in_one_piece(tmp_path):
    """The command `make demo` runs, in its tiny configuration: every
    runtime gives the in-memory model's outputs, the files are written, and
    TensorFlow's log lines do not break up the results table."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n\t(.+)$", makefile, flags=re.M).group(1)
    command = recipe.replace("$(PY)", sys.executable) + f" --tiny --output-dir {tmp_path}"
    result = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "I0000" not in result.stderr and "W0000" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("model "))
    rows = [re.fullmatch(r"(.+?)\s+(\S+)\s+(\S+)", line).groups() for line in lines[start + 1 : start + 6]]
    assert [name for name, _, _ in rows] == [
        "Keras predict_on_batch, in memory",
        "reloaded adding_problem.keras",
        "SavedModel, serve",
        "LiteRT, adding_problem.tflite",
        "LiteRT, adding_problem_step.tflite (10 steps)",
    ]
    for name, diff, ms in rows:
        assert float(diff) <= 1e-5 and float(ms) > 0.0, name
    for name in ("adding_problem.keras", "adding_problem_savedmodel/saved_model.pb", "adding_problem.tflite",
                 "adding_problem_step.tflite"):
        assert (tmp_path / name).is_file(), name


def run_quick(script, tmp_path, monkeypatch):
    """Runs a benchmark script in its quick mode, as `python <script> --quick
    --output ...` does (its `__main__` block, its argument parsing), but in
    this process: a process of its own would import TensorFlow again,
    5 s of each quick run. Returns what it wrote."""
    output = tmp_path / "RESULTS.md"
    path = ROOT / "benchmarks" / script
    monkeypatch.setattr(sys, "argv", [str(path), "--quick", "--output", str(output)])
    # The script puts its folder on sys.path and imports results_file from
    # there: both are undone afterwards.
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.modules.pop("results_file", None)
    return output.read_text()


@pytest.mark.slow
def test_lstm_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_lstm_cells.py", tmp_path, monkeypatch)
    for model in ("keras.layers.LSTM", "PeepholeLSTMCell", "CoupledLSTMCell"):
        assert f"| {model} | True |" in text and f"| {model} | False |" in text
    assert "Matmul peak" in text


@pytest.mark.slow
def test_tflite_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_tflite.py", tmp_path, monkeypatch)
    assert "<!-- bench_tflite:start -->" in text and "<!-- bench_tflite:end -->" in text
    for heading in ("Per-step (streaming) latency", "Per-sequence latency", "File size and accuracy"):
        assert heading in text
    for mode in ("float32", "float16", "dynamic_int8", "int8"):
        assert f"| {mode} |" in text


@pytest.mark.slow
def test_relational_memory_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_relational_memory.py", tmp_path, monkeypatch)
    assert "<!-- bench_relational_memory:start -->" in text
    for heading in ("RMC vs `keras.layers.LSTM`", "Scaling", "Where an RMC training step goes",
                    "Before and after the attention rewrite"):
        assert heading in text
    assert "the biggest cost of a training step is" in text


@pytest.mark.slow
def test_bag_of_features_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_bag_of_features.py", tmp_path, monkeypatch)
    assert "<!-- bench_bag_of_features:start -->" in text
    assert "<!-- bench_bag_of_features:end -->" in text
    assert "Quick smoke-test run" in text
    for heading in ("Codeword sweep", "Length sweep", "Memory at the largest size"):
        assert heading in text
    for model in ("quantizer + attention", "quantizer only"):
        assert f"| {model} |" in text
    assert "f32 infer frames/s" in text and "peak RSS" in text


@pytest.mark.slow
def test_tabl_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_tabl.py", tmp_path, monkeypatch)
    assert "<!-- bench_tabl:start -->" in text and "<!-- bench_tabl:end -->" in text
    assert "Quick smoke-test run" in text
    for heading in ("One layer over (D, T, D', T')", "How time grows with each dimension",
                    "The paper's C(TABL) network", "Batch-1 latency: LiteRT vs Keras",
                    "Conclusions"):
        assert heading in text
    for model in ("TABL", "BilinearLayer", "Dense"):
        assert f"| {model} |" in text
    assert "| LSTM(" in text and "| C(TABL): " in text and "| C(BL): " in text
    assert "export failed" not in text
    assert "TABL takes" in text and "C(TABL) answers in" in text


@pytest.mark.slow
def test_transformer_xl_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_transformer_xl.py", tmp_path, monkeypatch)
    assert "<!-- bench_transformer_xl:start -->" in text and "<!-- bench_transformer_xl:end -->" in text
    assert "Quick smoke-test run" in text
    rows = [line for line in text.splitlines() if line.startswith("| 16 |") or line.startswith("| 32 |")]
    assert len(rows) == 2 and all("×" in row for row in rows)


@pytest.mark.slow
def test_first_step_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_first_step.py", tmp_path, monkeypatch)
    assert "<!-- bench_first_step:start -->" in text and "<!-- bench_first_step:end -->" in text
    assert "Quick smoke-test run" in text and "failed" not in text
    for row in ("| LSTM | fit | graph |", "| Transformer-XL | fit | graph |", "| Transformer-XL | export | graph |"):
        assert row in text
    assert "the Transformer-XL's takes" in text


@pytest.mark.slow
def test_transformer_xl_wt103_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_transformer_xl_wt103.py", tmp_path, monkeypatch)
    assert "<!-- bench_transformer_xl_wt103:start -->" in text and "<!-- bench_transformer_xl_wt103:end -->" in text
    assert "Quick smoke-test run" in text
    # HF's parameter counts of the tiny WT103-shaped model, ours beside them
    # (the script asserts them equal); a row per backend.
    assert "| **total** | 30,811 | 30,811 |" in text
    for backend in ("TensorFlow, XLA", "TensorFlow, graph", "JAX (XLA)"):
        assert sum(line.startswith(f"| {backend}") for line in text.splitlines()) == 1, backend
    assert "not a prefix" not in text


@pytest.mark.slow
def test_segment_cache_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_segment_cache.py", tmp_path, monkeypatch)
    assert "<!-- bench_segment_cache:start -->" in text and "<!-- bench_segment_cache:end -->" in text
    assert "Quick smoke-test run" in text
    rows = [line for line in text.splitlines() if line.startswith("| 4 | 3 |")]
    assert len(rows) == 2 and all(row.count("×") == 2 for row in rows)


@pytest.mark.slow
def test_local_recurrence_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_local_recurrence.py", tmp_path, monkeypatch)
    assert "<!-- bench_local_recurrence:start -->" in text and "<!-- bench_local_recurrence:end -->" in text
    assert "Quick smoke-test run" in text
    rows = [line for line in text.splitlines() if line.startswith("| 50 | 3 |")]
    assert len(rows) == 1 and rows[0].count("×") == 2


@pytest.mark.slow
def test_relation_transformer_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_relation_transformer.py", tmp_path, monkeypatch)
    assert "<!-- bench_relation_transformer:start -->" in text and "<!-- bench_relation_transformer:end -->" in text
    assert "Quick smoke-test run" in text
    rows = [line for line in text.splitlines() if line.startswith("| 12 | 10 | 2 |")]
    assert len(rows) == 1 and rows[0].count("%") == 1 and rows[0].count(" / ") == 2


@pytest.mark.slow
def test_edge_targets_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_edge_targets.py", tmp_path, monkeypatch)
    assert "<!-- bench_edge_targets:start -->" in text and "<!-- bench_edge_targets:end -->" in text
    # Every target in its runtime, tflite-runtime 2.14 included; the fully
    # integer TABL file runs in TFLM with Keras' answers.
    for row in ("| C(TABL) (synthetic LOB) | float32 (litert) | tflite-runtime 2.14 | 100.0% | 100.0% |",
                "| C(TABL) (synthetic LOB) | int8 integer I/O (micro) | TFLM | 100.0% | 100.0% |",
                "| C(TABL) (synthetic LOB) | float32 (accelerator) | LiteRT | 100.0% | 100.0% |"):
        assert row in text, text


def test_ucr_goal_lines_judge_each_kind_of_set(monkeypatch):
    """bench_ucr's goal lines: a model that runs on both kinds of set
    against DTW overall and on each kind; an option on one kind only, on
    that kind; and nothing judged where a fit of a model that runs
    everywhere is missing."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        bench = runpy.run_path(str(ROOT / "benchmarks" / "bench_ucr.py"), run_name="bench_ucr")
    finally:
        sys.modules.pop("results_file", None)
    builders = list(bench["BUILDERS"])
    models = ["minirocket", "dtw", *builders, "recurrent_nbof_kernels"]
    averages = {}
    for kind, dtw in (("univariate", 90.0), ("multivariate", 96.0), ("all", 93.0)):
        averages[kind, "dtw"], averages[kind, "minirocket"] = dtw, dtw + 5
        for k, model in enumerate(builders):  # the first 1 point below DTW, the others above
            averages[kind, model] = dtw + k - 1
    averages["multivariate", "recurrent_nbof_kernels"] = 95.0
    info = {"GunPoint": {"majority": 50.0}, "BasicMotions": {"majority": 25.0}}
    results = [{"set": "BasicMotions", "model": "recurrent_nbof_kernels", "seed": 0, "accuracy": 0.25}]
    lines = bench["goal_lines"](results, ["GunPoint", "BasicMotions"], models, averages, info)
    assert lines[2:] == [
        "- NBoF: 92.0, not above 1-NN DTW (-1.0; by kind of set: univariate -1.0, multivariate -1.0); at the "
        "majority-class rate on no set (any seed).",
        "- attention NBoF: 93.0, not above 1-NN DTW (+0.0; by kind of set: univariate +0.0, multivariate +0.0); at "
        "the majority-class rate on no set (any seed).",
        "- recurrent NBoF: 94.0, above 1-NN DTW (+1.0; by kind of set: univariate +1.0, multivariate +1.0); at the "
        "majority-class rate on no set (any seed).",
        "- C(TABL): 95.0, above 1-NN DTW (+2.0; by kind of set: univariate +2.0, multivariate +2.0); at the "
        "majority-class rate on no set (any seed).",
        "- DRRT: 99.0 on the multivariate sets only (+3.0 against 1-NN DTW); at the majority-class rate on no set "
        "(any seed).",
        "- recurrent NBoF, kernels (an option, not a default): 95.0 on the multivariate sets only (-1.0 against "
        "1-NN DTW); at the majority-class rate on BasicMotions (any seed).",
        "- Best of ours, C(TABL): 3.0 points below MiniRocket (within 3 points).",
    ], lines
    del averages["all", "tabl"]
    assert bench["goal_lines"](results, ["GunPoint", "BasicMotions"], models, averages, info) == []


def test_ucr_held_out_protocol_chooses_on_one_half_and_judges_on_the_other(monkeypatch):
    """bench_ucr's held-out table: per family, the configuration with the
    best mean on one half, reported by its mean on the other, both ways;
    and the generated sets' verdicts against MiniRocket and DTW."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        bench = runpy.run_path(str(ROOT / "benchmarks" / "bench_ucr.py"), run_name="bench_ucr")
    finally:
        sys.modules.pop("results_file", None)
    first, second = bench["HALVES"]
    # NBoF's default wins on A (90 against 80) and loses on B (70 against 75).
    table = {}
    for s in first:
        table[s, "nbof"], table[s, "nbof_conv"] = (90.0, 0, 1), (80.0, 0, 1)
        table[s, "minirocket"], table[s, "dtw"] = (95.0, 0, 1), (60.0, 0, 1)
    for s in second:
        table[s, "nbof"], table[s, "nbof_conv"] = (70.0, 0, 1), (75.0, 0, 1)
        table[s, "minirocket"], table[s, "dtw"] = (85.0, 0, 1), (50.0, 0, 1)
    models = ["minirocket", "dtw", "nbof", "nbof_conv"]
    lines = bench["held_out_lines"](table, list(first + second), models)
    assert "| NBoF | NBoF | 70.0 | NBoF, conv | 80.0 | 75.0 |" in lines, lines
    assert "| MiniRocket | – | 85.0 | – | 95.0 | 90.0 |" in lines
    assert "| 1-NN DTW | – | 50.0 | – | 60.0 | 55.0 |" in lines
    # Without every set of both halves, no held-out table.
    assert bench["held_out_lines"](table, list(first), models) == []
    info = {"ScaledShapes": {"classes": 6, "train": 120, "steps": "100–300"}}
    table = {("ScaledShapes", "nbof"): (97.0, 1.0, 1), ("ScaledShapes", "tabl"): (90.0, 1.0, 1),
             ("ScaledShapes", "minirocket"): (95.0, 0.5, 1), ("ScaledShapes", "dtw"): (92.0, 0.0, 1)}
    lines = bench["generated_lines"](table, ["ScaledShapes"], ["minirocket", "dtw", "nbof", "tabl"], info)
    assert "| ScaledShapes | 6 × 20 | 100–300 | 1e-05–100 | 95.0 ± 0.5 | 92.0 | 97.0 ± 1.0 | 90.0 ± 1.0 |" in lines
    assert ("- NBoF: ScaledShapes +2.0 against MiniRocket (within 3 points), above 1-NN DTW." in lines
            and "- C(TABL): ScaledShapes -5.0 against MiniRocket (not within 3 points), not above 1-NN DTW." in lines)


@pytest.mark.slow
def test_ucr_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_ucr.py", tmp_path, monkeypatch)
    row = next(line for line in text.splitlines() if line.startswith("| ItalyPowerDemand |"))
    # Every model has its cell: published DTW, the two baselines, the five
    # builders and the ten options, of which the DRRT and one option run
    # on multivariate sets only ("–" here); then the long-series table, raw
    # steps against front-end.
    assert row.count("|") == 6 + 2 + 5 + 10 + 1 and "95.0" in row and row.count("–") == 2
    for model in ("MiniRocket", "1-NN DTW", "NBoF", "attention NBoF", "recurrent NBoF", "C(TABL)",
                  "NBoF, one codebook", "NBoF, uncompressed", "NBoF, conv", "attention NBoF, one codebook",
                  "attention NBoF, conv",
                  "recurrent NBoF, one quantizer", "recurrent NBoF, conv", "recurrent NBoF, kernels",
                  "C(TABL), 16 segments", "C(TABL), conv",
                  "front_end_recipes", "The goal, as measured", "LSTM, raw steps", "relational memory, front-end"):
        assert model in text
    long_row = [line for line in text.splitlines() if line.startswith("| ItalyPowerDemand | 24 |")]
    assert len(long_row) == 1 and long_row[0].count("|") == 2 + 6 + 1 and "–" not in long_row[0], long_row


@pytest.mark.slow
def test_fresh_interpreters_benchmark_quick(tmp_path, monkeypatch):
    text = run_quick("bench_fresh_interpreters.py", tmp_path, monkeypatch)
    assert "<!-- bench_fresh_interpreters:start -->" in text
    # The fixed files never answer wrong, in either interpreter.
    for name in ("constant RESHAPE shapes", "exported by this checkout"):
        for runtime in ("LiteRT", "tf.lite.Interpreter"):
            assert f"| {name} | 0 | {runtime} |" in text and text.split(f"| {name} | 0 | {runtime} |")[1].split(
                "\n")[0].rstrip().endswith("| 0/40 |")


def peers_available():
    """The reference Python bench_vs_pytorch.py would use (torch and
    transformers 4.35.0: `make .venv-reference/.installed`), or None; and
    the rows whose PyTorch code is at hand (the checkouts of its docstring)."""
    python = os.environ.get("REFERENCE_PYTHON") or str(ROOT / ".venv-reference" / "bin" / "python")
    check = "import torch, transformers; assert transformers.__version__ == '4.35.0'"
    if not os.path.exists(python) or subprocess.run([python, "-c", check], capture_output=True).returncode:
        return None, []
    rows = ["txl-gen", "txl-train"]
    for row, variable, path in (("rmc", "RMC_PYTORCH", "relational_rnn_general.py"),
                                ("rt", "R_TRANSFORMER", "models/RTransformer.py")):
        if os.environ.get(variable) and (pathlib.Path(os.environ[variable]) / path).is_file():
            rows.append(row)
    return python, rows


@pytest.mark.slow
def test_pytorch_peers_benchmark_quick(tmp_path, monkeypatch):
    """bench_vs_pytorch.py --quick: ours against HuggingFace's TransfoXL,
    and against the RMC port and R-Transformer where their checkouts are
    given (RMC_PYTORCH, R_TRANSFORMER); the outputs must agree."""
    python, rows = peers_available()
    if python is None:
        pytest.skip("needs torch and transformers 4.35.0: make .venv-reference/.installed (or REFERENCE_PYTHON)")
    output = tmp_path / "RESULTS.md"
    path = ROOT / "benchmarks" / "bench_vs_pytorch.py"
    monkeypatch.setattr(sys, "argv", [str(path), "--quick", "--output", str(output), "--reference-python", python,
                                      "--only", ",".join(rows)])
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.modules.pop("results_file", None)
    text = output.read_text()
    assert "<!-- bench_vs_pytorch:start -->" in text and "<!-- bench_vs_pytorch:end -->" in text
    assert "Quick smoke-test run" in text and "Load average before the run" in text
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("| work | unit |")) + 2
    table = lines[start : next(k for k in range(start, len(lines)) if not lines[k].startswith("|"))]
    expected = {"txl-gen": 2, "txl-train": 1, "rmc": 1, "rt": 1}
    assert len(table) == sum(expected[row] for row in rows), table
    for line in table:
        assert "TF" in line and "eager" in line, line
        assert ("yes:" in line) != line.startswith("| Relational memory"), line
    assert sum("JAX" in line for line in table) == 2
    if "rt" in rows:
        assert "Peak memory, R-Transformer" in text
