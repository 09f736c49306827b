# aqmlab: build, demo and test. Needs only Rust (cargo), Python >= 3.11 with venv + pip, make.
#
#   make demo   set up .venv, build the engine into it, run the two-CUBIC demo -> out/demo/
#   make test   cargo tests (release) + pytest
#   make bench  engine benchmark
#
# Setup is cached with stamp files in .venv/, so a second run only rebuilds what changed.

PYTHON  ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
VENV_ABS := $(abspath $(VENV))
DEPS_STAMP := $(VENV)/.stamp-deps
EXT_STAMP  := $(VENV)/.stamp-ext
DEMO_SCENARIO := scenarios/two-cubic-pfifo.toml
DEMO_OUT := out/demo

# Everything the compiled extension depends on.
RUST_SOURCES := Cargo.toml $(wildcard Cargo.lock) $(wildcard crates/*/Cargo.toml) \
	$(shell find crates -name '*.rs' -not -path '*/target/*' 2>/dev/null)

.PHONY: all setup demo test test-rust test-python bench clean distclean help

all: demo

help:
	@sed -n '3,8p' Makefile

# 1. The virtualenv with the runtime + test dependencies (read from pyproject.toml) and maturin.
$(DEPS_STAMP): pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --quiet --disable-pip-version-check \
		$$($(VPY) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
		print(" ".join(p["build-system"]["requires"] + p["project"]["dependencies"] \
		+ p["project"]["optional-dependencies"]["test"]))')
	@touch $@

# 2. The engine built in release mode and installed (editable) into the venv.
$(EXT_STAMP): $(DEPS_STAMP) $(RUST_SOURCES)
	PIP_QUIET=1 PIP_DISABLE_PIP_VERSION_CHECK=1 VIRTUAL_ENV=$(VENV_ABS) PATH=$(VENV_ABS)/bin:$$PATH $(VENV)/bin/maturin develop --release --quiet
	@touch $@

setup: $(EXT_STAMP)

demo: $(EXT_STAMP)
	$(VENV)/bin/aqmlab run $(DEMO_SCENARIO) --out $(DEMO_OUT)
	@echo "plot: $(DEMO_OUT)/throughput_rtt.png"

test: test-rust test-python

test-rust:
	cargo test --workspace --release

test-python: $(EXT_STAMP)
	$(VPY) -m pytest tests/python

bench:
	cargo run --release -p aqmlab-sim --bin aqmlab-bench

clean:
	rm -rf out python/aqmlab/_sim*.so $(EXT_STAMP)

distclean: clean
	rm -rf $(VENV) target
