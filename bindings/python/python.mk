# bindings/python/python.mk - the `ringd` Python package (included by the top
# Makefile).  `make python` builds it into $(BUILD)/python/ringd/: the .py files
# of bindings/python/ringd/ and the C extension _ringd (CPython C API, the
# system interpreter's headers from python3-dev).  `make install` puts the
# package where Debian's python3 finds it; `make test` runs its pytest suite
# through bindings/python/run-tests.
#
# libring is linked statically into the extension, with --exclude-libs so that
# none of its symbols is exported from it.  The module is then one file that
# needs nothing at run time but the interpreter (and the CUDA runtime when
# libring was built with CUDA): no rpath to get right for the build tree, an
# installed PREFIX and a DESTDIR staging alike, no chance of loading another
# version of libring.so than the one its C layer was built against, and a
# process that also loads libring.so (the torch backend, a C extension of its
# own) keeps the two apart instead of having one interpose on the other.  The
# cost, a rebuild of the module when libring changes, is what make does anyway.

PY        ?= /usr/bin/python3
# include dir, extension suffix and X.Y, in one run of the interpreter
PY_CONF   := $(shell $(PY) -c 'import sysconfig as s; print(s.get_paths()["include"], \
	s.get_config_var("EXT_SUFFIX"), s.get_python_version())' 2>/dev/null)
PY_INC    := $(word 1,$(PY_CONF))
PY_EXT    := $(word 2,$(PY_CONF))
PY_VER    := $(word 3,$(PY_CONF))
PY_OK     := $(if $(PY_INC),$(wildcard $(PY_INC)/Python.h))

PY_PKG    := $(BUILD)/python/ringd
PY_SO     := $(PY_PKG)/_ringd$(PY_EXT)
# The .py files, the extensions' type stubs (.pyi) and PEP 561's py.typed.
PY_PYSRC  := $(wildcard bindings/python/ringd/*.py bindings/python/ringd/*.pyi) \
	bindings/python/ringd/py.typed
PY_FILES  := $(patsubst bindings/python/ringd/%,$(PY_PKG)/%,$(PY_PYSRC))
PY_OBJ    := $(call obj,$(wildcard bindings/python/src/*.c))

# Debian's python3 looks in /usr/lib/python3/dist-packages (packages) and in
# /usr/local/lib/python3.X/dist-packages (local installs); other prefixes get
# the versioned directory too, for PYTHONPATH.  The extension is built for
# this X.Y (its file name says so).
PYTHONDIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PY_VER)/dist-packages)

.PHONY: python install-python uninstall-python
python: $(PY_SO) $(PY_FILES)

ifneq ($(PY_OK),)
BINDING_BUILD += $(PY_SO) $(PY_FILES)
install: install-python
uninstall: uninstall-python
endif
BINDING_TESTS += bindings/python/run-tests

# Python's headers are the system's: their warnings are not ours.
$(PY_OBJ): CFLAGS_ALL += -isystem $(PY_INC) -Ilibring -fvisibility=hidden
$(PY_OBJ): libring/ring.h | python-headers

.PHONY: python-headers
python-headers:
ifeq ($(PY_OK),)
	@echo "make python: no Python.h for $(PY) (install python3-dev:" \
		"scripts/install-deps)" >&2; exit 1
endif

$(PY_SO): $(PY_OBJ) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -shared -Wl,--exclude-libs,ALL -o $@ $(PY_OBJ) $(LIB_A) \
		$(CUDA_LIBS) -lm

$(PY_PKG)/%: bindings/python/ringd/%
	@mkdir -p $(dir $@)
	$(Q)install -m 0644 $< $@

install-python: $(PY_SO) $(PY_FILES)
	install -d $(DESTDIR)$(PYTHONDIR)/ringd
	install -m 0644 $(PY_FILES) $(PY_SO) $(DESTDIR)$(PYTHONDIR)/ringd/

# Also the byte code python3 may have written beside the installed files.
uninstall-python:
	rm -f $(addprefix $(DESTDIR)$(PYTHONDIR)/ringd/,$(notdir $(PY_FILES) $(PY_SO)))
	rm -rf $(DESTDIR)$(PYTHONDIR)/ringd/__pycache__
	@rmdir $(DESTDIR)$(PYTHONDIR)/ringd 2>/dev/null || true
