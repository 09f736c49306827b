# aqmlab: build, demo and test. Needs only Rust (cargo), Python >= 3.11 with venv + pip, make.
#
#   make demo   set up .venv, build the engine into it, run the two-CUBIC demo and the
#               l4s-tests S6 suite plus a slice of S1 -> out/demo/ (REPORT.md per suite)
#   make test   cargo tests (profile test-release) + pytest (installs ns-2.35 first: make ns2)
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

.PHONY: all setup demo validate test test-rust test-python bench clean distclean help ns2

all: demo

help:
	@sed -n '3,9p' Makefile

# 1. The virtualenv with the runtime + test dependencies (read from pyproject.toml) and maturin.
$(DEPS_STAMP): pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --quiet --disable-pip-version-check \
		$$($(VPY) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
		print(" ".join(p["build-system"]["requires"] + p["project"]["dependencies"] \
		+ p["project"]["optional-dependencies"]["test"]))')
	@touch $@

# 2. The engine built (profile test-release, shared with make test) and installed (editable) into the venv.
$(EXT_STAMP): $(DEPS_STAMP) $(RUST_SOURCES)
	PIP_QUIET=1 PIP_DISABLE_PIP_VERSION_CHECK=1 VIRTUAL_ENV=$(VENV_ABS) PATH=$(VENV_ABS)/bin:$$PATH $(VENV)/bin/maturin develop --profile test-release --quiet
	@touch $@

setup: $(EXT_STAMP)

demo: $(EXT_STAMP)
	$(VENV)/bin/aqmlab run $(DEMO_SCENARIO) --out $(DEMO_OUT)
	$(VENV)/bin/aqmlab suite run l4s-tests/s6 --out $(DEMO_OUT)/s6
	$(VENV)/bin/aqmlab suite run l4s-tests/s1 --filter rate=50Mbit --filter rtt=20/20 --out $(DEMO_OUT)/s1
	@echo "plot: $(DEMO_OUT)/throughput_rtt.png; reports: $(DEMO_OUT)/s6/REPORT.md, $(DEMO_OUT)/s1/REPORT.md"

test: test-rust test-python

test-rust:
	cargo test --workspace --profile test-release

test-python: $(EXT_STAMP) ns2
	$(VPY) -m pytest tests/python

# ns-2.35 (Debian's ns2 package) for the tests that check tools/ns2's fixtures against ns-2
# itself (tests/python/test_ns2_reference.py). Installed with apt-get only if `ns` is missing;
# when it cannot be installed (no apt-get, no root, no network) those tests skip, saying so.
ns2:
	@if command -v ns >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "ns2: ns-2 not installed and no apt-get here: the ns-2 reference tests will be skipped"; \
	else \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO="sudo -n"; \
		echo "ns2: installing Debian's ns2 package (ns-2.35) ..."; \
		( $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ns2 >/dev/null 2>&1 \
		  || { $$SUDO apt-get update -q >/dev/null 2>&1 && \
		       $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ns2 >/dev/null 2>&1; } ) \
		  && echo "ns2: installed $$(command -v ns)" \
		  || echo "ns2: could not install the ns2 package (apt-get failed): the ns-2 reference tests will be skipped"; \
	fi

# Runs the suites that have published numbers (reusing finished runs) -> out/validate/VALIDATION.md
validate: $(EXT_STAMP)
	$(VENV)/bin/aqmlab validate --out out/validate

bench:
	cargo run --release -p aqmlab-sim --bin aqmlab-bench

clean:
	rm -rf out python/aqmlab/_sim*.so $(EXT_STAMP)

distclean: clean
	rm -rf $(VENV) target
