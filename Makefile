# aqmlab: build, demo and test. Needs only Rust (cargo), Python >= 3.11 with venv + pip, make.
#
#   make demo   set up .venv, build the engine into it, run the two-CUBIC demo and the
#               l4s-tests S6 suite plus a slice of S1 -> out/demo/ (REPORT.md per suite)
#   make test   cargo tests (profile test-release) + pytest (installs tshark and ns-2.35 first: make test-tools)
#   make bench  engine benchmark + scaling tables (bench/scaling.py; make bench-deps for Dask)
#   PGO=0|1     the engine is built profile-guided when rustc's llvm-profdata is there (rustup
#               component llvm-tools), else plain (PGO=0 forces plain; PGO=1 insists): tools/pgo/build
#   make bench-deps  the optional benchmark dependencies (ns3 wheel, dask) into .venv;
#               then .venv/bin/python bench/compare_ns3.py (aqmlab vs ns-3 3.44, side by side)
#   make fuzz   cargo-fuzz targets (nightly), FUZZ_SECONDS each (default 300); docs/fuzzing.md
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

# Everything the compiled extension depends on (with the profile-guided build's training runs).
RUST_SOURCES := Cargo.toml $(wildcard Cargo.lock) $(wildcard crates/*/Cargo.toml) \
	$(shell find crates -name '*.rs' -not -path '*/target/*' 2>/dev/null)
PGO_SOURCES := tools/pgo/build tools/pgo/rustc-wrapper bench/pgo_train.py
export PGO

.PHONY: all setup demo validate test test-rust test-python test-tools bench bench-deps fuzz fuzz-replay clean distclean help

all: demo

help:
	@sed -n '3,14p' Makefile

# 1. The virtualenv with the runtime + test dependencies (read from pyproject.toml) and maturin.
$(DEPS_STAMP): pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --quiet --disable-pip-version-check \
		$$($(VPY) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
		print(" ".join(p["build-system"]["requires"] + p["project"]["dependencies"] \
		+ p["project"]["optional-dependencies"]["test"]))')
	@touch $@

# 2. The engine built (profile test-release) and installed (editable) into the venv: profile-guided
# (instrumented build in target/pgo-gen, bench/pgo_train.py, the build with the profile in
# target/pgo-use) when rustc's llvm-profdata is there, else plain (in target/, shared with make
# test). Same results either way; docs/performance.md, "Session 7: the build".
$(EXT_STAMP): $(DEPS_STAMP) $(RUST_SOURCES) $(PGO_SOURCES)
	VENV=$(VENV) tools/pgo/build ext
	@touch $@

setup: $(EXT_STAMP)

demo: $(EXT_STAMP)
	$(VENV)/bin/aqmlab run $(DEMO_SCENARIO) --out $(DEMO_OUT)
	$(VENV)/bin/aqmlab suite run l4s-tests/s6 --out $(DEMO_OUT)/s6
	$(VENV)/bin/aqmlab suite run l4s-tests/s1 --filter rate=50Mbit --filter rtt=20/20 --out $(DEMO_OUT)/s1
	@echo "plot: $(DEMO_OUT)/throughput_rtt.png, HTML report: $(DEMO_OUT)/report.html; suite reports: $(DEMO_OUT)/s6/REPORT.md and index.html, $(DEMO_OUT)/s1/REPORT.md and index.html"

test: test-rust test-python

test-rust:
	cargo test --workspace --profile test-release

test-python: $(EXT_STAMP) test-tools
	$(VPY) -m pytest tests/python

# The real tools some tests compare against, from Debian's packages: tshark (pcap tests,
# tests/python/test_pcap.py), ns-2.35 (tools/ns2's fixtures, test_ns2_reference.py) and
# chromium (tests/python/test_html.py loads the HTML reports headless).
# Each missing one is installed with apt-get, non-interactively (as root, or with passwordless
# sudo); one that cannot be installed makes its tests skip with a message saying so.
TEST_TOOLS := tshark:tshark ns:ns2 chromium:chromium
test-tools:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	updated=; \
	for pair in $(TEST_TOOLS); do \
		cmd=$${pair%%:*}; pkg=$${pair#*:}; \
		command -v $$cmd >/dev/null 2>&1 && continue; \
		if [ "$$SUDO" = none ] || ! command -v apt-get >/dev/null 2>&1; then \
			echo "test-tools: cannot install $$pkg (needs apt-get as root or passwordless sudo); its tests will be skipped"; continue; \
		fi; \
		echo "test-tools: installing $$pkg (apt-get install $$pkg)"; \
		echo "wireshark-common wireshark-common/install-setuid boolean false" | $$SUDO debconf-set-selections 2>/dev/null; \
		[ -n "$$updated" ] || { $$SUDO apt-get update -qq >/dev/null 2>&1; updated=1; }; \
		$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkg >/dev/null 2>&1 \
			|| echo "test-tools: apt-get install $$pkg failed; its tests will be skipped"; \
	done

# Runs the suites that have published numbers (reusing finished runs) -> out/validate/VALIDATION.md
validate: $(EXT_STAMP)
	$(VENV)/bin/aqmlab validate --out out/validate

bench: $(EXT_STAMP)
	bin=$$(tools/pgo/build bench) && $$bin
	$(VPY) bench/scaling.py

# Optional: only the benchmarks need them (the [bench] extra of pyproject.toml).
bench-deps: $(EXT_STAMP)
	$(VPY) -m pip install --quiet --disable-pip-version-check \
		$$($(VPY) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
		print(" ".join(p["project"]["optional-dependencies"]["bench"]))')

# libFuzzer on the parser targets (fuzz/, issue 14), one after another, FUZZ_SECONDS each, at low
# priority. Needs the nightly toolchain and cargo-fuzz (installed here if missing). New inputs
# go to fuzz/corpus/<target> (not committed); a crash stops with its input in fuzz/artifacts/:
# add it to fuzz/regressions/<target>/, which `make test` replays. `make fuzz-replay` counts the
# outcomes (accepted, rejected) of every corpus input with the stable-Rust driver.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS := scenario overrides qdisc cc
fuzz:
	@rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus/$$t fuzz/artifacts; \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		nice -n 10 cargo +nightly fuzz run -s none -a $$t fuzz/corpus/$$t fuzz/seeds/$$t fuzz/regressions/$$t -- \
			-max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 || exit 1; \
	done

fuzz-replay:
	AQMLAB_FUZZ_REPLAY=1 cargo test --profile test-release -p aqmlab-sim --test integration replay_regressions_and_fuzz_corpus -- --nocapture

clean:
	rm -rf out python/aqmlab/_sim*.so $(EXT_STAMP)

distclean: clean
	rm -rf $(VENV) target
