# Quick start: `make run` (set up, fetch the default model, run the main job) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system-packages run test test-slow hermes clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,speech,train]'
	touch $@

setup: $(STAMP) system-packages

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

# The main job: start the stack on the default model, run the canonical 5-turn suite through
# the agent, print each turn's transcript and the pass/fail table (report under .samevm/suites/).
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
