# Two entry points: `make demo` runs Frenzy's main job, `make test` runs the tests.
# Both create or reuse .venv and install what they need.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test bench accuracy clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch is pinned to the exact CPU wheel that every machine carries (see README).
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[trace,dev,bench,sim,serve,ray]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m frenzy.demo

test: $(STAMP)
	$(BIN)/python -m pytest tests

bench: $(STAMP)
	$(BIN)/python bench/plan_speed.py
	$(BIN)/python bench/accuracy.py

clean:
	rm -rf $(VENV) build src/*.egg-info
