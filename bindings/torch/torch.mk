# bindings/torch/torch.mk - torch.distributed's "ring" backend: the C++
# extension ringd._torch (a c10d::ProcessGroup on libring, linked statically
# and with libring's symbols kept inside it) and ringd/torch.py, which
# registers the backend.  Both go to $(BUILD)/python/ringd/, the package the
# Python binding builds there too (bindings/python/python.mk: its
# __init__.py; without one, ringd is a namespace package and `import
# ringd.torch` works all the same), and install to Debian's dist-packages
# under PREFIX.
#
# The compiler flags come from the torch that /usr/bin/python3 imports (its
# headers, its C++ ABI and the pybind11 ABI it was built with: see
# bindings/torch/build-flags), written once per build to $(TORCH_DIR)/cflags;
# without libtorch-dev the backend is left out with a message, and its test
# wrapper reports the suite as skipped.
#
# Targets: python-torch (built by `make python` and `make test`),
# install-torch and uninstall-torch (run by `make install` / `uninstall`).

TORCH_PY       ?= /usr/bin/python3
TORCH_DIR      := $(BUILD)/torch
TORCH_PKG      := $(BUILD)/python/ringd
TORCH_SRC      := $(wildcard bindings/torch/*.cpp)
TORCH_OBJ      := $(patsubst bindings/torch/%.cpp,$(TORCH_DIR)/%.o,$(TORCH_SRC))
TORCH_EXT      := $(TORCH_PKG)/_torch.so
TORCH_PYFILES  := $(TORCH_PKG)/torch.py
TORCH_HAVE     := $(if $(wildcard /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp \
	/usr/lib/python3/dist-packages/torch/include/torch/csrc/distributed/c10d/ProcessGroup.hpp),1,0)
TORCH_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC -fvisibility=hidden -pthread -Wall -Wextra \
	-Wno-unused-parameter -MMD -MP -I. $(HARDEN_CFLAGS) $(CXXFLAGS)
# ASAN=1 (make ASAN=1 BUILD=build-asan python): the extension is instrumented
# like the libring it links; an interpreter loads it only with the sanitizer's
# runtime preloaded (LD_PRELOAD), as the suite's ASan tests do.
ifeq ($(ASAN),1)
TORCH_CXXFLAGS += -fsanitize=address -fno-omit-frame-pointer
TORCH_LDFLAGS  := -fsanitize=address,undefined
endif
# Where python.mk installs the package (its PYTHONDIR), else Debian's path.
TORCH_PYDIR    ?= $(or $(PYTHONDIR),$(PREFIX)/lib/python3/dist-packages)

.PHONY: python python-torch install-torch uninstall-torch
BINDING_BUILD += python-torch
BINDING_TESTS += bindings/torch/run-tests
python: python-torch
install: install-torch
uninstall: uninstall-torch

ifeq ($(TORCH_HAVE),1)
python-torch: $(TORCH_EXT) $(TORCH_PYFILES)
else
python-torch:
	@echo "torch backend: left out (no libtorch-dev; scripts/install-deps installs it)"
endif

$(TORCH_DIR)/cflags $(TORCH_DIR)/libs: bindings/torch/build-flags
	@mkdir -p $(dir $@)
	$(Q)$(TORCH_PY) bindings/torch/build-flags $(notdir $@) > $@.tmp 2>/dev/null || \
		{ rm -f $@.tmp; $(TORCH_PY) bindings/torch/build-flags $(notdir $@); exit 1; }
	$(Q)mv $@.tmp $@

$(TORCH_DIR)/%.o: bindings/torch/%.cpp $(TORCH_DIR)/cflags $(FLAGS_STAMP)
	$(call msg,CXX,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CXX) $(TORCH_CXXFLAGS) $$(cat $(TORCH_DIR)/cflags) -c $< -o $@

# libring is linked in, its symbols hidden (--exclude-libs): the extension
# exports only its module init, so it never meets the ringd._ringd module's
# libring in the same process, and needs no libring.so at run time.
$(TORCH_EXT): $(TORCH_OBJ) $(LIB_A) $(TORCH_DIR)/libs
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CXX) -shared -pthread $(HARDEN_LDFLAGS) $(TORCH_LDFLAGS) $(LDFLAGS) -o $@ $(TORCH_OBJ) $(LIB_A) \
		-Wl,--exclude-libs,ALL $$(cat $(TORCH_DIR)/libs) $(CUDA_LIBS) -lm

$(TORCH_PKG)/torch.py: bindings/python/ringd/torch.py
	@mkdir -p $(dir $@)
	$(Q)cp $< $@

install-torch: python-torch
ifeq ($(TORCH_HAVE),1)
	install -d $(DESTDIR)$(TORCH_PYDIR)/ringd
	install -m 0644 $(TORCH_PYFILES) $(DESTDIR)$(TORCH_PYDIR)/ringd/
	install -m 0644 $(TORCH_EXT) $(DESTDIR)$(TORCH_PYDIR)/ringd/
endif

uninstall-torch:
	rm -f $(DESTDIR)$(TORCH_PYDIR)/ringd/torch.py $(DESTDIR)$(TORCH_PYDIR)/ringd/_torch.so
	@rmdir $(DESTDIR)$(TORCH_PYDIR)/ringd 2>/dev/null || true
