# The two commands of the README: `make demo` and `make test`. Each creates
# .venv on first use and (re)installs when setup.py changes.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test test-slow bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-export: setup.py pyproject.toml | $(PY)
	$(PIP) install -e ".[export]"
	touch $@

$(VENV)/.installed-test: setup.py pyproject.toml | $(PY)
	$(PIP) install -e ".[test]"
	touch $@

demo: $(VENV)/.installed-export
	$(PY) -m keras_relrec.demo

test: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider

# Long work left out of `make test`: full tutorials, benchmarks.
test-slow: $(VENV)/.installed-test
	$(PY) -m pytest -q -p no:cacheprovider -m slow

# Every benchmark, each rewriting its section of benchmarks/RESULTS.md
# (about 15 minutes on 2 cores).
bench: $(VENV)/.installed-test
	$(PY) benchmarks/bench_lstm_cells.py
	$(PY) benchmarks/bench_tflite.py
	$(PY) benchmarks/bench_relational_memory.py
	$(PY) benchmarks/bench_bag_of_features.py
	$(PY) benchmarks/bench_tabl.py

clean:
	rm -rf $(VENV) demo_output build *.egg-info
