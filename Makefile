# The README's commands: `make demo`, `make test` (the everyday tier) and
# `make check` (what CI runs); `make docs` builds the documentation site.
# Each creates .venv on first use and (re)installs when setup.py,
# pyproject.toml or constraints.txt change.
# constraints.txt pins the exact versions tested. The tiers are pytest
# markers (pyproject.toml): `make test` runs the tests marked neither
# `check` nor `slow`, `make check` adds `check` and reruns `jax` on JAX,
# `make test-slow` runs `slow` and reruns `jax_slow` on JAX.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
INSTALL_INPUTS := setup.py pyproject.toml constraints.txt
# torch and transformers, for the live parity reruns (test-parity, test-slow).
REFERENCE := .venv-reference
# Two pytest workers: the suite is CPU-bound and the reference machine has
# two cores. loadgroup: tests sharing a costly per-process fixture (marked
# xdist_group, or using a module-scoped one: tests/conftest.py) run on one
# worker.
WORKERS ?= 2

.PHONY: demo test check lint docs test-slow test-parity bench bench-peers bench-ucr clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-demo: $(INSTALL_INPUTS) | $(PY)
	$(PIP) install -c constraints.txt -e ".[tensorflow-cpu,export,tutorials]"
	touch $@

$(VENV)/.installed-test: $(INSTALL_INPUTS) | $(PY)
	$(PIP) install -c constraints.txt -e ".[test]"
	touch $@

# The documentation's tools (the `docs` extra), beside the test extras: the
# site's build reads the package's sources and imports none of it.
$(VENV)/.installed-docs: $(INSTALL_INPUTS) | $(PY)
	$(PIP) install -c constraints.txt -e ".[docs]"
	touch $@

# The launcher keeps TensorFlow's log lines off the terminal.
demo: $(VENV)/.installed-demo
	$(PY) -m keras_relrec_cli demo

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .

# The documentation site (docs/, mkdocs.yml) into site/, offline. --strict:
# a broken link or anchor, a page missing from the navigation, an API entry
# that names nothing or a docstring griffe cannot read fails the build.
# (The python blocks of the pages run in tests/test_docs.py.)
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir site

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
# JAX runs side by side: 40 s against 36 s).
ONE_THREAD := TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 \
	XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
PYTEST := $(ONE_THREAD) OLD_RUNTIME_PYTHON=$(OLD_RUNTIME)/bin/python $(PY) -m pytest -q -p no:cacheprovider
PARALLEL := -n $(WORKERS) --dist loadgroup

# Lint, every family's equations against NumPy, the Keras contract of every
# layer on TensorFlow, one LiteRT export per family.
test: lint
	$(PYTEST) $(PARALLEL) -m "not slow and not check"

# `make test`'s tests and every check that guards a promise of the README
# and the documentation, on TensorFlow; the backend-neutral ones again on
# JAX; the contract's golden outputs and training steps again on
# TensorFlow's portable kernels (oneDNN off, as on CPUs it does not tune
# for); the documentation site built with --strict.
check: lint docs $(OLD_RUNTIME)/.installed
	$(PYTEST) $(PARALLEL) -m "not slow"
	KERAS_BACKEND=jax $(PYTEST) $(PARALLEL) -m "jax and not slow"
	TF_ENABLE_ONEDNN_OPTS=0 $(PYTEST) $(PARALLEL) -m "not slow" tests/contract/test_backends.py

# Long work: full tutorials, benchmarks in their quick mode, multi-process
# distribution, the live parity reruns (R_TRANSFORMER: see test-parity) and
# the long backend-neutral tests again on JAX.
test-slow: $(VENV)/.installed-test $(OLD_RUNTIME)/.installed $(REFERENCE)/.installed
	REFERENCE_PYTHON=$(REFERENCE)/bin/python R_TRANSFORMER=$(R_TRANSFORMER) $(PYTEST) -m slow
	KERAS_BACKEND=jax KERAS_RELREC_SLOW_TESTS=1 $(PYTEST) -m jax_slow

# Parity, live: a second environment with torch and transformers 4.35.0
# regenerates the committed golden arrays of HuggingFace's TransfoXL and of
# the public R-Transformer code.
$(REFERENCE)/.installed:
	$(PYTHON) -m venv $(REFERENCE)
	$(REFERENCE)/bin/python -m pip --disable-pip-version-check -q install torch==2.13.0 transformers==4.35.0 numpy
	touch $@

# R_TRANSFORMER: a checkout of DSE-MSU/R-transformer, for its goldens.
test-parity: $(VENV)/.installed-test $(REFERENCE)/.installed
	REFERENCE_PYTHON=$(REFERENCE)/bin/python R_TRANSFORMER=$(R_TRANSFORMER) $(PY) -m pytest -q -p no:cacheprovider -m "" \
		tests/migrate/test_hf_transfo_xl.py tests/layers/local_recurrence/test_r_transformer_goldens.py

# Every benchmark, each rewriting its section of benchmarks/RESULTS.md
# (about 25 minutes on 2 cores).
bench: $(VENV)/.installed-test $(OLD_RUNTIME)/.installed
	$(PY) benchmarks/bench_lstm_cells.py
	$(PY) benchmarks/bench_tflite.py
	$(PY) benchmarks/bench_relational_memory.py
	$(PY) benchmarks/bench_bag_of_features.py
	$(PY) benchmarks/bench_tabl.py
	$(PY) benchmarks/bench_transformer_xl.py
	$(PY) benchmarks/bench_transformer_xl_wt103.py
	$(PY) benchmarks/bench_segment_cache.py
	$(PY) benchmarks/bench_first_step.py
	$(PY) benchmarks/bench_local_recurrence.py
	$(PY) benchmarks/bench_relation_transformer.py
	OLD_RUNTIME_PYTHON=$(OLD_RUNTIME)/bin/python $(PY) benchmarks/bench_edge_targets.py
	$(PY) benchmarks/bench_fresh_interpreters.py

# Ours against PyTorch peers (RMC_PYTORCH, R_TRANSFORMER: their checkouts).
bench-peers: $(VENV)/.installed-test $(REFERENCE)/.installed
	REFERENCE_PYTHON=$(REFERENCE)/bin/python RMC_PYTORCH=$(RMC_PYTORCH) R_TRANSFORMER=$(R_TRANSFORMER) \
		$(PY) benchmarks/bench_vs_pytorch.py

# The builders with their recipes against MiniRocket and 1-NN DTW on the
# UCR/UEA sets bundled in aeon, 3 seeds (about 650 minutes of fits, 5.5 hours
# on 2 cores; fits already in benchmarks/ucr_results.json are kept, so delete
# it to rerun all).
bench-ucr: $(VENV)/.installed-test
	$(PY) benchmarks/bench_ucr.py --results-json benchmarks/ucr_results.json

clean:
	rm -rf $(VENV) $(REFERENCE) $(OLD_RUNTIME) demo_output build site *.egg-info
