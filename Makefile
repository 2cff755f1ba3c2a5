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
	$(BIN)/pip install --quiet -e ".[trace,dev,sim,serve,ray]"
	rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m frenzy.demo

test: $(STAMP)
	$(BIN)/python -m pytest tests

# The other estimators for bench/accuracy.py: DeepSpeed without its CUDA ops, and llm-analysis in its
# own venv because it pins transformers<5.
.venv-llm-analysis/bin/python:
	$(PYTHON) -m venv .venv-llm-analysis
	.venv-llm-analysis/bin/pip install --quiet "llm-analysis==0.2.2"

bench: $(STAMP) .venv-llm-analysis/bin/python
	DS_BUILD_OPS=0 $(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python bench/plan_speed.py
	$(BIN)/python bench/accuracy.py

clean:
	rm -rf $(VENV) build src/*.egg-info
