# bindings/rust/rust.mk - the Rust binding in `make test` (the Makefile includes
# every bindings/*/*.mk).  rust-build builds the workspace and its test
# binaries and examples with cargo, offline, after libring, into
# $(BUILD)/rust; bindings/rust/run-tests runs `cargo test` and reports its
# counts.  Nothing here is installed: a Rust program depends on the crates by
# path or git (docs/rust.md) and links the installed
# libring through pkg-config.  Without cargo, rust-build says so and builds
# nothing (the wrapper then reports the suite as skipped).
CARGO       ?= cargo
RUST_DIR    := bindings/rust
# The wrapper runs outside make's variables; this tells it which build to use.
export RINGD_RUST_BUILD := $(abspath $(BUILD))
RUST_ENV    := CARGO_TARGET_DIR=$(abspath $(BUILD))/rust RINGD_LIB_DIR=$(abspath $(BUILD))/lib

# The Makefile includes this file before its `all` rule: keep the default goal
# as it would be without this file (an empty .DEFAULT_GOAL lets the next rule
# parsed become it).
RUST_GOAL := $(.DEFAULT_GOAL)
.PHONY: rust-build
rust-build: $(LIB_A) $(LIB_PC) $(BIN_RINGD) $(BIN_CTL)
	@if ! command -v $(CARGO) >/dev/null 2>&1; then \
		echo "  CARGO   skipped: $(CARGO) not found (scripts/install-deps installs it)"; \
	else \
		printf '  %-7s %s\n' CARGO $(RUST_DIR); \
		cd $(RUST_DIR) && $(RUST_ENV) $(CARGO) build --offline --workspace $(if $(filter 1,$(V)),,-q) && \
		$(RUST_ENV) $(CARGO) test --offline --workspace --no-run $(if $(filter 1,$(V)),,-q); \
	fi

# rust-lint (run by make lint): src/bindings.rs is what bindgen makes of ring.h
# now (gen-bindings --check), the crates are rustfmt-clean, and clippy finds
# nothing (-D warnings, every target: tests and examples too).  It runs
# Debian's toolchain (rustc 1.63, its rustfmt and clippy, bindgen 0.60) when it
# is installed, ahead of any rustup one on PATH: the formatting and the lints
# are those of the toolchain the crates promise to build with.
RUST_LINT_PATH := $(if $(wildcard /usr/bin/cargo-clippy),/usr/bin:)$(PATH)
.PHONY: rust-lint
rust-lint: $(LIB_A) $(LIB_PC)
	$(call msg,BINDGEN,$(RUST_DIR)/ringd-sys/src/bindings.rs)
	$(Q)PATH=$(RUST_LINT_PATH) $(RUST_DIR)/ringd-sys/gen-bindings --check
	$(call msg,RUSTFMT,$(RUST_DIR))
	$(Q)cd $(RUST_DIR) && PATH=$(RUST_LINT_PATH) $(CARGO) fmt --all --check
	$(call msg,CLIPPY,$(RUST_DIR))
	$(Q)cd $(RUST_DIR) && PATH=$(RUST_LINT_PATH) $(RUST_ENV) $(CARGO) clippy --offline \
		--workspace --all-targets -q -- -D warnings

.DEFAULT_GOAL := $(RUST_GOAL)

BINDING_BUILD += rust-build
BINDING_TESTS += $(RUST_DIR)/run-tests
