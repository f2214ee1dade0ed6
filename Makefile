# ringd - build everything: `make`, `make test`, `make demo`, `make install`.
# Switches: V=1 (show commands), ASAN=1 (AddressSanitizer+UBSan), WERROR=1,
# CUDA=0|1 (libring's CUDA staging; default: when nvcc is found), DEBUG=1 (-O0).

PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     ?= build
CC        ?= cc
PKG       ?= pkg-config

VERSION   := 0.1.0
SOVERSION := 0

WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes \
	-Wvla -Wundef -Wpointer-arith -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
OPT := -O2
ifeq ($(DEBUG),1)
OPT := -O0
endif
CFLAGS_ALL := -std=gnu11 $(OPT) -g -fPIC -pthread $(WARN) -MMD -MP -D_GNU_SOURCE \
	-DRING_VERSION_STRING=\"$(VERSION)\" -I. $(CFLAGS)
LDFLAGS_ALL := -pthread $(LDFLAGS)
ifeq ($(ASAN),1)
CFLAGS_ALL += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS_ALL += -fsanitize=address,undefined
endif

EVENT_LIBS   := $(shell $(PKG) --libs libevent_core libevent_extra libevent_pthreads libevent_openssl 2>/dev/null)
SSL_LIBS     := $(shell $(PKG) --libs openssl 2>/dev/null)
JANSSON_LIBS := $(shell $(PKG) --libs jansson 2>/dev/null)
CRIT_LIBS    := $(shell $(PKG) --libs criterion 2>/dev/null)

# CUDA: automatic unless told.
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda))
ifeq ($(origin CUDA),undefined)
CUDA := $(if $(and $(CUDA_HOME),$(wildcard $(CUDA_HOME)/include/cuda_runtime.h)),1,0)
endif

ifeq ($(V),1)
Q :=
msg = @true
else
Q := @
msg = @printf '  %-7s %s\n' $(1) $(2)
endif

PROTO_SRC  := $(wildcard proto/*.c)
RINGD_SRC  := $(filter-out ringd/main.c,$(wildcard ringd/*.c))
CTL_SRC    := $(wildcard ringctl/*.c)
LIB_SRC    := $(filter-out libring/%_cuda.c,$(wildcard libring/*.c))
ifeq ($(CUDA),1)
LIB_SRC    += $(wildcard libring/*_cuda.c)
CFLAGS_ALL += -DRING_HAVE_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
endif

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
PROTO_OBJ := $(call obj,$(PROTO_SRC))
RINGD_OBJ := $(call obj,$(RINGD_SRC))
CTL_OBJ   := $(call obj,$(CTL_SRC))
LIB_OBJ   := $(call obj,$(LIB_SRC))

BIN_RINGD  := $(BUILD)/bin/ringd
BIN_CTL    := $(BUILD)/bin/ringctl
BIN_BENCH  := $(BUILD)/bin/ring-bench
LIB_A      := $(BUILD)/lib/libring.a
LIB_SO     := $(BUILD)/lib/libring.so.$(SOVERSION)
LIB_PC     := $(BUILD)/lib/libring.pc

# Tests: unit_*.c link only the module they test; it_*.c are integration tests
# with real daemons and link libring and the test harness.
UNIT_SRC := $(wildcard tests/unit_*.c)
IT_SRC   := $(filter-out tests/it_cuda.c,$(wildcard tests/it_*.c))
ifeq ($(CUDA),1)
IT_SRC   += tests/it_cuda.c
endif
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(UNIT_SRC) $(IT_SRC))
HARNESS_OBJ := $(call obj,tests/harness.c)
EXAMPLES := $(patsubst libring/examples/%.c,$(BUILD)/bin/%,$(filter-out %_cuda.c,$(wildcard libring/examples/*.c)))
ifeq ($(CUDA),1)
EXAMPLES += $(patsubst libring/examples/%.c,$(BUILD)/bin/%,$(wildcard libring/examples/*_cuda.c))
endif

.PHONY: all test demo install uninstall clean deps check-asan fuzz
all: $(BIN_RINGD) $(BIN_CTL) $(LIB_A) $(LIB_SO) $(LIB_PC) $(BIN_BENCH) $(EXAMPLES)

# Objects depend on the flags they were built with (CUDA=, ASAN=, DEBUG= ...):
# the stamp is rewritten only when they change, and then everything rebuilds.
FLAGS_STAMP := $(BUILD)/.flags
$(shell mkdir -p $(BUILD) && echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) CUDA=$(CUDA)' | \
	cmp -s - $(FLAGS_STAMP) || echo '$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) CUDA=$(CUDA)' > $(FLAGS_STAMP))

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BIN_RINGD): $(BUILD)/ringd/main.o $(RINGD_OBJ) $(PROTO_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(EVENT_LIBS) $(SSL_LIBS) $(JANSSON_LIBS) -lm

$(BIN_CTL): $(CTL_OBJ) $(PROTO_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(JANSSON_LIBS) -lm

$(LIB_A): $(LIB_OBJ) $(PROTO_OBJ)
	$(call msg,AR,$@)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(LIB_OBJ) $(PROTO_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -shared -Wl,-soname,libring.so.$(SOVERSION) \
		-Wl,--version-script=libring/libring.map -o $@ $^ $(CUDA_LIBS) -lm
	$(Q)ln -sf libring.so.$(SOVERSION) $(BUILD)/lib/libring.so

$(LIB_PC): libring/libring.pc.in
	@mkdir -p $(dir $@)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
		-e 's|@LIBS_PRIVATE@|$(CUDA_LIBS) -lm -pthread|g' $< > $@

$(BIN_BENCH): $(call obj,bench/ring-bench.c) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CUDA_LIBS) -lm

$(BUILD)/bin/%: $(BUILD)/libring/examples/%.o $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CUDA_LIBS) -lm

# ---- tests ----
$(BUILD)/tests/unit_proto: $(BUILD)/tests/unit_proto.o $(PROTO_OBJ)
$(BUILD)/tests/unit_config: $(BUILD)/tests/unit_config.o $(BUILD)/ringd/config.o \
	$(BUILD)/ringd/hostfile.o $(PROTO_OBJ)
$(BUILD)/tests/unit_arena: $(BUILD)/tests/unit_arena.o $(LIB_A)
$(BUILD)/tests/unit_env: $(BUILD)/tests/unit_env.o $(LIB_A)
$(BUILD)/tests/unit_%: $(BUILD)/tests/unit_%.o
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CRIT_LIBS) $(JANSSON_LIBS) $(CUDA_LIBS) -lm
$(BUILD)/tests/it_%: $(BUILD)/tests/it_%.o $(HARNESS_OBJ) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CRIT_LIBS) $(JANSSON_LIBS) $(CUDA_LIBS) -lm

# `make test` and `make demo` are the README's commands for a fresh machine, so
# they install what is missing first and only then run make again for the real
# work: the pkg-config results above were computed when this file was read,
# before the packages were there.  `test-run` and `demo-run` skip the check.
.PHONY: test-run demo-run
test: deps
	$(Q)$(MAKE) --no-print-directory test-run

test-run: all $(TEST_BINS)
	$(Q)scripts/run-tests $(TEST_BINS)

demo: deps
	$(Q)$(MAKE) --no-print-directory demo-run

demo-run: all
	$(Q)scripts/demo

deps:
	$(Q)scripts/install-deps

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/lib \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(BIN_RINGD) $(DESTDIR)$(PREFIX)/sbin/ringd
	install -m 0755 $(BIN_CTL) $(BIN_BENCH) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 scripts/ring-local $(DESTDIR)$(PREFIX)/bin/ring-local
	install -m 0644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libring.so.$(SOVERSION) $(DESTDIR)$(PREFIX)/lib/libring.so
	install -m 0644 $(LIB_PC) $(DESTDIR)$(PREFIX)/lib/pkgconfig/libring.pc
	install -m 0644 libring/ring.h $(DESTDIR)$(PREFIX)/include/ring.h

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/sbin/ringd $(DESTDIR)$(PREFIX)/bin/ringctl \
		$(DESTDIR)$(PREFIX)/bin/ring-bench $(DESTDIR)$(PREFIX)/bin/ring-local \
		$(DESTDIR)$(PREFIX)/lib/libring.a $(DESTDIR)$(PREFIX)/lib/libring.so \
		$(DESTDIR)$(PREFIX)/lib/libring.so.$(SOVERSION) \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig/libring.pc $(DESTDIR)$(PREFIX)/include/ring.h

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
.SECONDARY:
