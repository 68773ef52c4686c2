# rolloutbench: every target sets up the virtual environment it needs.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup test lint reproduce reproduce-rolloutpipe bench calibrate clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check .

reproduce: setup
	$(BIN)/rolloutbench reproduce all --out results --figures figures

reproduce-rolloutpipe: setup
	$(BIN)/rolloutbench reproduce rolloutpipe --out results --figures figures

calibrate: setup
	$(BIN)/rolloutbench calibrate all

bench: setup
	$(BIN)/python -m harness.bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
