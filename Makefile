# Quick start: `make run` (set up, fetch the default model, run the main job) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# With an NVIDIA driver, the CUDA extra whose CuPy build matches the driver's CUDA major version.
CUDA_MAJOR := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -n 1)
comma  := ,
EXTRAS := dev,speech,train$(if $(filter 12 13,$(CUDA_MAJOR)),$(comma)cuda$(CUDA_MAJOR))

.PHONY: setup browser system-packages run test test-slow hermes clean

# setup.py builds the CPU kernels (runtime/backends/cpu_kernels/*.c) into the editable install: rebuilt when they change
$(STAMP): pyproject.toml setup.py $(wildcard runtime/backends/cpu_kernels/*.c runtime/backends/cpu_kernels/*.h runtime/backends/cpu_kernels/*.inc)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $@

setup: $(STAMP) browser system-packages

# Debian packages the product uses where present: poppler-utils (pdftotext, the PDF text
# extractor RAG measured best). Installed when root on apt; otherwise a message, and RAG
# reads PDFs with pypdfium2 instead.
DEBIAN_PACKAGES := poppler-utils
system-packages:
	@if command -v pdftotext >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get install -y -q $(DEBIAN_PACKAGES) || (apt-get update -q && apt-get install -y -q $(DEBIAN_PACKAGES))) >/dev/null \
		|| echo "note: apt-get could not install $(DEBIAN_PACKAGES); RAG falls back to pypdfium2"; \
	else echo "note: pdftotext not found; install $(DEBIAN_PACKAGES) (sudo apt-get install $(DEBIAN_PACKAGES)) for the best PDF text; RAG falls back to pypdfium2"; fi

# The console's browser tests drive Debian's chromium through Playwright's Python package (never a
# browser Playwright downloads). Installed when we are root on a Debian-like system; else the tests skip.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for the console's browser tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
	    || echo "make setup: could not install chromium; the console's browser tests will be skipped"; \
	else echo "make setup: no chromium and not root: run 'sudo apt-get install chromium' for the console's browser tests (skipped without it)"; fi

# The main job: start the stack on the default model (the 0.5B with its tools adapter, on a GPU
# and on the CPU), run the canonical 5-turn suite through the agent, print each turn's
# transcript, the pass/fail table and what failed (report under .samevm/suites/).
run: setup
	$(BIN)/samevm models fetch
	$(BIN)/samevm suite canonical

test: setup
	$(BIN)/python -m pytest

test-slow: setup
	$(BIN)/python -m pytest -m slow

# Hermes agent pins its own openai/pydantic: it gets a venv of its own (git-ignored, under .samevm)
HERMES_VENV := .samevm/hermes/venv
hermes: setup
	$(BIN)/python -c "from tools.hermes import install; print(install('$(HERMES_VENV)'))"

clean:
	rm -rf $(VENV) .pytest_cache
