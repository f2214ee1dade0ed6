# bindings/rust/rust.mk - the Rust binding in `make test` (the Makefile includes
# every bindings/*/*.mk).  rust-build builds the workspace and its test
# binaries and examples with cargo, offline, after libring, into
# $(BUILD)/rust; bindings/rust/run-tests runs `cargo test` and reports its
# counts.  Nothing here is installed: a Rust program depends on the crates by
# path or git (see bindings/rust/README-section.md) and links the installed
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

.DEFAULT_GOAL := $(RUST_GOAL)

BINDING_BUILD += rust-build
BINDING_TESTS += $(RUST_DIR)/run-tests
