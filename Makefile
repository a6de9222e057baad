# The two commands of the README: `make demo` and `make test`. Each creates
# .venv on first use and (re)installs when setup.py, pyproject.toml or
# constraints.txt change. constraints.txt pins the exact versions tested.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
INSTALL_INPUTS := setup.py pyproject.toml constraints.txt
# Two pytest workers: the suite is CPU-bound and the reference machine has
# two cores. loadgroup: tests sharing a costly per-process fixture (marked
# xdist_group, or using a module-scoped one: tests/conftest.py) run on one
# worker.
WORKERS ?= 2

.PHONY: demo test lint test-slow test-parity bench bench-ucr clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-demo: $(INSTALL_INPUTS) | $(PY)
	$(PIP) install -c constraints.txt -e ".[tensorflow-cpu,export,tutorials]"
	touch $@

$(VENV)/.installed-test: $(INSTALL_INPUTS) | $(PY)
	$(PIP) install -c constraints.txt -e ".[test]"
	touch $@

# The launcher keeps TensorFlow's log lines off the terminal.
demo: $(VENV)/.installed-demo
	$(PY) -m keras_relrec_cli demo

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .

# An older TF Lite runtime that deployed devices still carry, in its own
# environment (its wheel is built against NumPy 1): the tests run exported
# files there.
OLD_RUNTIME := .venv-tflite-2.14
$(OLD_RUNTIME)/.installed:
	$(PYTHON) -m venv $(OLD_RUNTIME)
	$(OLD_RUNTIME)/bin/python -m pip --disable-pip-version-check -q install tflite-runtime==2.14.0 numpy==1.26.4
	touch $@

# One TensorFlow (and JAX) thread per worker: two workers on two cores,
# each with a pool of two threads, spent a fifth of their time contending
# (the contract's XLA, training and TFLite checks: 141 s against 108 s; two
# JAX reruns side by side: 40 s against 36 s).
test: lint $(OLD_RUNTIME)/.installed
	OLD_RUNTIME_PYTHON=$(OLD_RUNTIME)/bin/python TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 \
		XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
		$(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadgroup

# Long work left out of `make test`: full tutorials, benchmarks in their
# quick mode, the JAX reruns of whole families.
test-slow: $(VENV)/.installed-test $(OLD_RUNTIME)/.installed
	OLD_RUNTIME_PYTHON=$(OLD_RUNTIME)/bin/python $(PY) -m pytest -q -p no:cacheprovider -m slow

# Parity, live: a second environment with torch and transformers 4.35.0
# regenerates the committed golden arrays of HuggingFace's TransfoXL and of
# the public R-Transformer code.
REFERENCE := .venv-reference
$(REFERENCE)/.installed:
	$(PYTHON) -m venv $(REFERENCE)
	$(REFERENCE)/bin/python -m pip --disable-pip-version-check -q install torch==2.13.0 transformers==4.35.0 numpy
	touch $@

# R_TRANSFORMER: a checkout of DSE-MSU/R-transformer, for its goldens.
test-parity: $(VENV)/.installed-test $(REFERENCE)/.installed
	REFERENCE_PYTHON=$(REFERENCE)/bin/python R_TRANSFORMER=$(R_TRANSFORMER) $(PY) -m pytest -q -p no:cacheprovider \
		tests/migrate/test_hf_transfo_xl.py tests/layers/local_recurrence/test_r_transformer_goldens.py

# Every benchmark, each rewriting its section of benchmarks/RESULTS.md
# (about 20 minutes on 2 cores).
bench: $(VENV)/.installed-test $(OLD_RUNTIME)/.installed
	$(PY) benchmarks/bench_lstm_cells.py
	$(PY) benchmarks/bench_tflite.py
	$(PY) benchmarks/bench_relational_memory.py
	$(PY) benchmarks/bench_bag_of_features.py
	$(PY) benchmarks/bench_tabl.py
	$(PY) benchmarks/bench_transformer_xl.py
	$(PY) benchmarks/bench_segment_cache.py
	$(PY) benchmarks/bench_local_recurrence.py
	$(PY) benchmarks/bench_relation_transformer.py
	OLD_RUNTIME_PYTHON=$(OLD_RUNTIME)/bin/python $(PY) benchmarks/bench_edge_targets.py
	$(PY) benchmarks/bench_fresh_interpreters.py

# The builders with their recipes against MiniRocket and 1-NN DTW on the
# UCR/UEA sets bundled in aeon, 3 seeds (about 650 minutes of fits, 5.5 hours
# on 2 cores; fits already in benchmarks/ucr_results.json are kept, so delete
# it to rerun all).
bench-ucr: $(VENV)/.installed-test
	$(PY) benchmarks/bench_ucr.py --results-json benchmarks/ucr_results.json

clean:
	rm -rf $(VENV) $(REFERENCE) $(OLD_RUNTIME) demo_output build *.egg-info
