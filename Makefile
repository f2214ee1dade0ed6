# ringd - build everything: `make`, `make test`, `make demo`, `make install`.
# Switches: V=1 (show commands), ASAN=1 (AddressSanitizer+UBSan), TSAN=1
# (ThreadSanitizer; not with ASAN=1, each in a build tree of its own), WERROR=1,
# CUDA=0|1 (libring's CUDA staging; default: when nvcc is found), DEBUG=1 (-O0),
# HARDEN=0 (leave out the hardening flags below).

PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     ?= build
CC        ?= cc
PKG       ?= pkg-config

VERSION   := 0.1.0
SOVERSION := 0

WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes \
	-Wvla -Wundef -Wpointer-arith -Wredundant-decls -Wcast-qual -Wlogical-op \
	-Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
OPT := -O2
ifeq ($(DEBUG),1)
OPT := -O0
endif

# Hardening, as Debian builds its packages (dpkg-buildflags' hardening=+all):
# stack protector, fortified libc calls, full RELRO with immediate binding, and
# position-independent executables.  Every object is compiled -fPIC (it may go
# into libring.so), which a PIE link takes as it is.  _FORTIFY_SOURCE needs the
# optimiser (not DEBUG=1) and stays out of ASAN=1, whose interceptors check the
# same calls and do not see the fortified variants (nor TSAN=1, whose runtime
# intercepts the plain calls too).  tests/it_install checks that the installed
# programs and libring.so carry all of it.
HARDEN ?= 1
ifeq ($(HARDEN),1)
HARDEN_CFLAGS  := -fstack-protector-strong \
	$(if $(filter -O0,$(OPT))$(filter 1,$(ASAN) $(TSAN)),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2)
HARDEN_LDFLAGS := -Wl,-z,relro,-z,now
PIE_LDFLAGS    := -pie
endif

CFLAGS_ALL := -std=gnu11 $(OPT) -g -fPIC -pthread $(WARN) -MMD -MP -D_GNU_SOURCE \
	$(HARDEN_CFLAGS) -DRING_VERSION_STRING=\"$(VERSION)\" -I. $(CFLAGS)
LDFLAGS_ALL := -pthread $(HARDEN_LDFLAGS) $(LDFLAGS)
ifeq ($(ASAN),1)
CFLAGS_ALL += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS_ALL += -fsanitize=address,undefined
endif
# ThreadSanitizer (issue 39): the data path's worker threads (threads = 2 and
# more) against the engine thread.  Its runtime and ASan's cannot share a
# process, so the two are two builds: `make TSAN=1 BUILD=build-tsan`.
ifeq ($(TSAN),1)
ifeq ($(ASAN),1)
$(error ASAN=1 and TSAN=1 exclude each other: build them apart (BUILD=build-asan, BUILD=build-tsan))
endif
CFLAGS_ALL += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS_ALL += -fsanitize=thread
# Criterion's runner cannot start under TSan (its arena wants an address TSan
# keeps for itself): the TSan daemons run under the plain build's tests.
ifneq ($(filter test test-run test-build chaos,$(MAKECMDGOALS)),)
$(error TSAN=1: the test programs cannot run under ThreadSanitizer; tests/tsan.sh runs the daemons of a TSAN=1 tree under the plain build's tests)
endif
endif
# Programs are PIE; libring.so is linked -shared with LDFLAGS_ALL alone.
EXE_LDFLAGS := $(LDFLAGS_ALL) $(PIE_LDFLAGS)

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
BIN_HOP    := $(BUILD)/bin/hop-latency
BIN_PLANSIM := $(BUILD)/bin/plan-sim
BIN_WIREK  := $(BUILD)/bin/wire-kernels
LIB_A      := $(BUILD)/lib/libring.a
LIB_SO     := $(BUILD)/lib/libring.so.$(SOVERSION)
LIB_PC     := $(BUILD)/lib/libring.pc

# Tests: unit_*.c link only the module they test; it_*.c are integration tests
# with real daemons and link libring and the test harness.
UNIT_SRC := $(wildcard tests/unit_*.c)
IT_SRC   := $(filter-out tests/it_cuda.c tests/it_chaos.c,$(wildcard tests/it_*.c))
ifeq ($(CUDA),1)
IT_SRC   += tests/it_cuda.c
endif
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(UNIT_SRC) $(IT_SRC))
# The chaos soak (issue 25) runs for a set time, so on its own: `make chaos`
# (RING_CHAOS_S seconds, 60 unless set; RING_CHAOS_SEED replays a run).
CHAOS := $(BUILD)/tests/it_chaos
# The engine's deterministic simulation (tests/sim): the engine and ring floors
# of ringd as they are, over a fake link floor and a virtual clock (its own
# timer.c and proto clock), no socket.  1000 seeded schedules a run.
SIM_ENGINE := $(BUILD)/tests/sim/engine-sim
SIM_RINGD  := $(call obj,$(addprefix ringd/,jobtab.c flow.c ops.c op.c msgnum.c p2p.c collq.c execwait.c exec.c jobform.c job.c jobattach.c revoke.c jobgrow.c \
	coll.c fail.c engine.c ring.c member.c census.c linkout.c arena.c plan.c plan_rs.c plan_2l.c local.c config.c hostfile.c \
	pool.c))
TEST_BINS  += $(SIM_ENGINE)
# The bindings (bindings/*/*.mk) add their builds to BINDING_BUILD and their
# suites' wrappers (which print "run-tests-counts: ..." for scripts/run-tests) to
# BINDING_TESTS.  They load libring.so from $(BUILD)/lib, so they stay out of
# the sanitizer builds (ASAN=1, TSAN=1), whose runtime an interpreter does not
# preload.
BINDING_BUILD :=
BINDING_TESTS :=
# `make` alone builds all, whatever rule a binding's file defines first.
.DEFAULT_GOAL := all
-include $(sort $(wildcard bindings/*/*.mk))
ifeq ($(filter 1,$(ASAN) $(TSAN)),)
TEST_BINS += $(BINDING_TESTS)
endif
# The one reference data pattern (ring.h only): the harness, ring-bench and
# the examples link it.
PATTERN_OBJ := $(call obj,tests/pattern.c)
HARNESS_OBJ := $(call obj,$(wildcard tests/harness*.c)) $(PATTERN_OBJ)
# ASAN=1: LeakSanitizer's suppression of Criterion's own leak (tests/lsan.c).
TEST_SAN_OBJ := $(if $(filter 1,$(ASAN)),$(call obj,tests/lsan.c))
EXAMPLES := $(patsubst libring/examples/%.c,$(BUILD)/bin/%,$(filter-out %_cuda.c,$(wildcard libring/examples/*.c)))
ifeq ($(CUDA),1)
EXAMPLES += $(patsubst libring/examples/%.c,$(BUILD)/bin/%,$(wildcard libring/examples/*_cuda.c))
endif

.PHONY: all test demo install uninstall clean deps check-asan fuzz
all: $(BIN_RINGD) $(BIN_CTL) $(LIB_A) $(LIB_SO) $(LIB_PC) $(BIN_BENCH) $(BIN_HOP) $(EXAMPLES) \
	$(BIN_PLANSIM) $(BIN_WIREK)

# Objects depend on the flags they were built with (CUDA=, ASAN=, DEBUG= ...):
# the stamp is rewritten only when they change, and then everything rebuilds.
# `make install` and `make uninstall` alone (and any make given FLAGS_KEEP=1)
# take the tree as the last build left it: they write the stamp only when there
# is none, so a `sudo make install` without the build's WERROR=1 or ASAN=1 does
# not rebuild everything as root.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(CFLAGS_ALL) $(EXE_LDFLAGS) CUDA=$(CUDA)
FLAGS_WRITE := $(if $(MAKECMDGOALS),$(filter-out install uninstall,$(MAKECMDGOALS)),all)
ifeq ($(FLAGS_KEEP),1)
FLAGS_WRITE :=
endif
ifneq ($(FLAGS_WRITE),)
$(shell mkdir -p $(BUILD) && echo '$(FLAGS_NOW)' | cmp -s - $(FLAGS_STAMP) || \
	echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))
else
$(shell mkdir -p $(BUILD) && [ -f $(FLAGS_STAMP) ] || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))
endif

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	$(call msg,CC,$<)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BIN_RINGD): $(BUILD)/ringd/main.o $(RINGD_OBJ) $(PROTO_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(SSL_LIBS) $(JANSSON_LIBS) -lm

$(BIN_CTL): $(CTL_OBJ) $(PROTO_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(JANSSON_LIBS) -lm

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

# build/lib/libring.pc is for the build tree's PREFIX of the moment; `make
# install` writes the installed one afresh from libring.pc.in, so that
# `make && make install PREFIX=/usr` installs a .pc that says /usr.
$(LIB_PC): libring/libring.pc.in
	@mkdir -p $(dir $@)
	$(Q)sed $(PC_SED) $< > $@

$(BIN_HOP): $(call obj,bench/hop-latency.c)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^

# The compression kernels' timer (issue 27): proto/dtype.c and compress.c alone.
$(BIN_WIREK): $(call obj,bench/wire-kernels.c) $(BUILD)/proto/dtype.o $(BUILD)/proto/compress.o
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^

# The simulator of the real plans (bench/sim): ringd/plan.c walked in the
# executor's semantics over a model of links; tests/unit_plansim asserts on it.
PLANSIM_OBJ := $(call obj,bench/sim/plansim.c) $(BUILD)/ringd/plan.o $(BUILD)/ringd/plan_rs.o $(BUILD)/ringd/plan_2l.o
$(BIN_PLANSIM): $(call obj,bench/sim/plan-sim.c) $(PLANSIM_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ -lm

$(BIN_BENCH): $(call obj,bench/ring-bench.c bench/bench_coll.c bench/bench_cost.c bench/bench_cuda.c) \
	$(PATTERN_OBJ) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(CUDA_LIBS) -lm

$(BUILD)/bin/%: $(BUILD)/libring/examples/%.o $(PATTERN_OBJ) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(CUDA_LIBS) -lm

# ---- tests ----
# One unit test a proto module (unit_proto_frame tests proto/frame.c ...), with
# the table-driven codec checks they share.
PROTO_UNITS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/unit_proto_*.c))
$(PROTO_UNITS): $(call obj,tests/proto_check.c) $(PROTO_OBJ)
$(BUILD)/tests/unit_config: $(BUILD)/tests/unit_config.o $(BUILD)/ringd/config.o \
	$(BUILD)/ringd/hostfile.o $(PROTO_OBJ)
$(BUILD)/tests/unit_plan: $(BUILD)/tests/unit_plan.o $(BUILD)/ringd/plan.o $(BUILD)/ringd/plan_rs.o $(BUILD)/ringd/plan_2l.o
$(BUILD)/tests/unit_plansim: $(BUILD)/tests/unit_plansim.o $(PLANSIM_OBJ)
# libring against the fake ringd of tests/fake_daemon.c (unit_arena: only for
# its scrubbed environment).
FAKE_OBJ := $(call obj,tests/fake_daemon.c)
$(BUILD)/tests/unit_arena: $(BUILD)/tests/unit_arena.o $(FAKE_OBJ) $(LIB_A)
$(BUILD)/tests/unit_client: $(BUILD)/tests/unit_client.o $(FAKE_OBJ) $(LIB_A)
$(BUILD)/tests/unit_env: $(BUILD)/tests/unit_env.o $(LIB_A)
# it_install checks the installed programs for the hardening this tree promises.
$(BUILD)/tests/it_install.o: CFLAGS_ALL += -DRING_HARDEN=$(if $(filter 1,$(HARDEN)),1,0)
$(BUILD)/tests/unit_%: $(BUILD)/tests/unit_%.o $(TEST_SAN_OBJ)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(CRIT_LIBS) $(JANSSON_LIBS) $(CUDA_LIBS) -lm
$(BUILD)/tests/it_%: $(BUILD)/tests/it_%.o $(HARNESS_OBJ) $(TEST_SAN_OBJ) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(CRIT_LIBS) $(JANSSON_LIBS) $(CUDA_LIBS) $(IT_LIBS) -lm
# it_forged proves the cluster secret itself, as a peer that holds it does
$(BUILD)/tests/it_forged: IT_LIBS := $(SSL_LIBS)

$(SIM_ENGINE): $(call obj,$(wildcard tests/sim/*.c)) $(SIM_RINGD) \
	$(filter-out $(BUILD)/proto/clock.o,$(PROTO_OBJ))
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JANSSON_LIBS) -lm

# The writev that lingers (tests/writev_linger.c), which tests/it_streams
# preloads into its daemons: built without a sanitizer, as it loads into any
# build's ringd.
LINGER_SO := $(BUILD)/tests/writev_linger.so
$(LINGER_SO): tests/writev_linger.c
	$(call msg,CC,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 -O2 -g -fPIC -shared $(WARN) -o $@ $< -ldl
$(BUILD)/tests/it_streams: | $(LINGER_SO)

# The client-protocol fuzzer (tests/fuzz/client_fuzz.c): random clients, raw and
# through libring, against real daemons.  `make ASAN=1 BUILD=build-asan
# client-fuzz` builds it with the daemons it drives; tests/fuzz/client-fuzz.sh runs
# it.  It is no test of test-run (it runs for as long as it is told) and no
# libFuzzer target of tests/fuzz/build.sh.
CLIENT_FUZZ := $(BUILD)/tests/fuzz/client_fuzz
$(CLIENT_FUZZ): $(call obj,tests/fuzz/client_fuzz.c) $(PATTERN_OBJ) $(LIB_A)
	$(call msg,LD,$@)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(EXE_LDFLAGS) -o $@ $^ $(CUDA_LIBS) -lm
.PHONY: client-fuzz
client-fuzz: $(CLIENT_FUZZ) $(BIN_RINGD) $(BIN_CTL)

# The README's commands for a fresh machine are scripts/demo and scripts/test
# (a bare Debian has no make yet); `make demo` and `make test` are the same for
# those who have make.  They install what is missing first and only then run
# make again for the real work: the pkg-config results above were computed when
# this file was read, before the packages were there.  `test-run` and
# `demo-run` skip the check.
.PHONY: test-run demo-run test-build test-list
test: deps
	$(Q)$(MAKE) --no-print-directory test-run

test-run: test-build
	$(Q)scripts/run-tests $(TEST_BINS)

# What scripts/test uses: it runs the tests itself, so that nothing of make's
# follows the summary line when a test fails.
test-build: all $(TEST_BINS) $(CHAOS) $(if $(filter 1,$(ASAN) $(TSAN)),,$(BINDING_BUILD))
.PHONY: chaos
# run-tests' bound: the soak's time and 5 minutes for its start and its end
chaos: all $(CHAOS)
	$(Q)RUN_TESTS_TIMEOUT=$$(( $${RING_CHAOS_S:-60} + 300 )) scripts/run-tests $(CHAOS)
test-list:
	@echo $(TEST_BINS)

demo: deps
	$(Q)$(MAKE) --no-print-directory demo-run

demo-run: all
	$(Q)scripts/run-demo

deps:
	$(Q)scripts/install-deps

# ---- install ----
# Every directory may be set on the command line, DESTDIR for staging (a
# package's root).  What depends on them (libring.pc, the systemd units) is
# written at install time, never baked into the build: `make`, then
# `make install PREFIX=/usr` is right without a rebuild.  The systemd files, the
# man pages and ringrun are picked up when the tree has them.
BINDIR         ?= $(PREFIX)/bin
SBINDIR        ?= $(PREFIX)/sbin
LIBDIR         ?= $(PREFIX)/lib
INCLUDEDIR     ?= $(PREFIX)/include
PKGCONFIGDIR   ?= $(LIBDIR)/pkgconfig
MANDIR         ?= $(PREFIX)/share/man
DOCDIR         ?= $(PREFIX)/share/doc/ringd
# /etc even for PREFIX=/usr/local: the units, the man pages and ringd@.service's
# /etc/ringd/%i.conf all name /etc/ringd.
SYSCONFDIR     ?= /etc
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR    ?= $(PREFIX)/lib/tmpfiles.d
SYSUSERSDIR    ?= $(PREFIX)/lib/sysusers.d
GZIP_MAN       ?= 0

SD_UNITS    := $(wildcard systemd/*.service systemd/*.socket systemd/*.target)
SD_TMPFILES := $(wildcard systemd/ringd.tmpfiles)
SD_SYSUSERS := $(wildcard systemd/ringd.sysusers)
SD_CONF     := $(wildcard systemd/ringd.conf.example)
MAN_PAGES   := $(wildcard man/*.1 man/*.3 man/*.5 man/*.7 man/*.8)
RINGRUN     := $(wildcard scripts/ringrun)
ETC_CONF     = $(DESTDIR)$(SYSCONFDIR)/ringd/ringd.conf

# libring.pc: libdir and includedir relative to ${prefix} when they lie under it;
# a libring with CUDA entry points has clients define RING_HAVE_CUDA, which
# declares them in ring.h (they need no CUDA header).
LIB_CUDA := $(if $(filter 1,$(CUDA)),$(if $(wildcard libring/*_cuda.c),1,0),0)
pc_rel = $(if $(filter $(PREFIX)/%,$(1)),$${$(2)}/$(patsubst $(PREFIX)/%,%,$(1)),$(1))
PC_SED = -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
	-e 's|@LIBDIR@|$(call pc_rel,$(LIBDIR),exec_prefix)|g' \
	-e 's|@INCLUDEDIR@|$(call pc_rel,$(INCLUDEDIR),prefix)|g' \
	-e 's|@CUDA@|$(LIB_CUDA)|g' -e 's|@LIBS_PRIVATE@|$(CUDA_LIBS) -lm -pthread|g' \
	-e 's| *@CFLAGS@|$(if $(filter 1,$(LIB_CUDA)), -DRING_HAVE_CUDA=1)|g'
# The units as installed: the programs an Exec*= line starts (any directory)
# become the installed ones, /etc/ringd becomes SYSCONFDIR's.
UNIT_SED = -e 's|^\(Exec[A-Za-z]*=[-@+!:]*\)/[^ ]*/ringd\( .*\)\{0,1\}$$|\1$(SBINDIR)/ringd\2|' \
	-e 's|^\(Exec[A-Za-z]*=[-@+!:]*\)/[^ ]*/ringctl\( .*\)\{0,1\}$$|\1$(BINDIR)/ringctl\2|' \
	-e 's|/etc/ringd/|$(SYSCONFDIR)/ringd/|g'
# man/ringd.8 -> MANDIR/man8/ringd.8
man_dest = $(DESTDIR)$(MANDIR)/man$(patsubst .%,%,$(suffix $(1)))/$(notdir $(1))
# $(call install_sed,SED-ARGS,SRC,DEST,MODE): SRC through sed, installed as DEST.
install_sed = echo "sed ... $(2) | install -m $(4) $(3)"; \
	sed $(1) $(2) > $(3).tmp$$$$ && install -m $(4) $(3).tmp$$$$ $(3); \
	rc=$$?; rm -f $(3).tmp$$$$; [ $$rc = 0 ]

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)
	install -m 0755 $(BIN_RINGD) $(DESTDIR)$(SBINDIR)/ringd
	install -m 0755 $(BIN_CTL) $(BIN_BENCH) $(DESTDIR)$(BINDIR)/
	install -m 0755 scripts/ring-local $(DESTDIR)$(BINDIR)/ring-local
ifneq ($(RINGRUN),)
	install -m 0755 $(RINGRUN) $(DESTDIR)$(BINDIR)/ringrun
endif
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libring.a
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libring.so.$(SOVERSION)
	ln -sf libring.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libring.so
	@$(call install_sed,$(PC_SED),libring/libring.pc.in,$(DESTDIR)$(PKGCONFIGDIR)/libring.pc,0644)
	install -m 0644 libring/ring.h proto/ring_types.h $(DESTDIR)$(INCLUDEDIR)/
ifneq ($(SD_UNITS),)
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)
	@for f in $(SD_UNITS); do \
		$(call install_sed,$(UNIT_SED),$$f,$(DESTDIR)$(SYSTEMDUNITDIR)/$${f##*/},0644) || exit 1; \
	done
endif
ifneq ($(SD_TMPFILES),)
	install -d $(DESTDIR)$(TMPFILESDIR)
	install -m 0644 $(SD_TMPFILES) $(DESTDIR)$(TMPFILESDIR)/ringd.conf
endif
ifneq ($(SD_SYSUSERS),)
	install -d $(DESTDIR)$(SYSUSERSDIR)
	install -m 0644 $(SD_SYSUSERS) $(DESTDIR)$(SYSUSERSDIR)/ringd.conf
endif
ifneq ($(SD_CONF),)
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 $(SD_CONF) $(DESTDIR)$(DOCDIR)/ringd.conf.example
	@# The operator's ringd.conf is never overwritten: the example goes to
	@# SYSCONFDIR only where there is none yet (and where we may write).
	@if [ -e $(ETC_CONF) ]; then \
		echo "kept $(ETC_CONF) (the example is $(DESTDIR)$(DOCDIR)/ringd.conf.example)"; \
	elif install -d $(DESTDIR)$(SYSCONFDIR)/ringd 2>/dev/null; then \
		echo "install -m 0644 $(SD_CONF) $(ETC_CONF)"; \
		install -m 0644 $(SD_CONF) $(ETC_CONF); \
	else \
		echo "$(DESTDIR)$(SYSCONFDIR)/ringd is not writable: no ringd.conf installed" \
			"(copy $(DESTDIR)$(DOCDIR)/ringd.conf.example, or set SYSCONFDIR)"; \
	fi
endif
ifneq ($(MAN_PAGES),)
	for f in $(MAN_PAGES); do \
		d=$(DESTDIR)$(MANDIR)/man$${f##*.}; \
		install -d $$d && install -m 0644 $$f $$d/ || exit 1; \
		if [ "$(GZIP_MAN)" = 1 ]; then gzip -9nf $$d/$${f##*/} || exit 1; \
		else rm -f $$d/$${f##*/}.gz; fi; \
	done
endif
	@# Installed onto this very system (no DESTDIR, as root): what a package's
	@# post-install script would do.  The user ringd and group ringd-users,
	@# /etc/ringd's owner and mode, the loader cache, systemd's view of the units.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
		if command -v ldconfig >/dev/null; then echo ldconfig; ldconfig; fi; \
		if [ -f $(SYSUSERSDIR)/ringd.conf ] && command -v systemd-sysusers >/dev/null; then \
			echo "systemd-sysusers $(SYSUSERSDIR)/ringd.conf"; \
			systemd-sysusers $(SYSUSERSDIR)/ringd.conf || exit 1; fi; \
		if [ -f $(TMPFILESDIR)/ringd.conf ] && command -v systemd-tmpfiles >/dev/null; then \
			echo "systemd-tmpfiles --create $(TMPFILESDIR)/ringd.conf"; \
			systemd-tmpfiles --create $(TMPFILESDIR)/ringd.conf || exit 1; fi; \
		if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then \
			echo "systemctl daemon-reload"; systemctl daemon-reload || true; fi; \
	fi

UNINSTALL_FILES = $(addprefix $(DESTDIR)$(SBINDIR)/,ringd) \
	$(addprefix $(DESTDIR)$(BINDIR)/,ringctl ring-bench ring-local ringrun) \
	$(addprefix $(DESTDIR)$(LIBDIR)/,libring.a libring.so libring.so.$(SOVERSION)) \
	$(DESTDIR)$(PKGCONFIGDIR)/libring.pc $(addprefix $(DESTDIR)$(INCLUDEDIR)/,ring.h ring_types.h) \
	$(DESTDIR)$(TMPFILESDIR)/ringd.conf $(DESTDIR)$(SYSUSERSDIR)/ringd.conf \
	$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(notdir $(SD_UNITS))) \
	$(foreach f,$(MAN_PAGES),$(call man_dest,$(f)) $(call man_dest,$(f)).gz)

# Removes what install put there, and nothing else: the operator's ringd.conf
# stays unless it is still the example, byte for byte.
uninstall:
	rm -f $(strip $(UNINSTALL_FILES))
	@ex=$(DESTDIR)$(DOCDIR)/ringd.conf.example; [ -f $$ex ] || ex=systemd/ringd.conf.example; \
	if [ -f $(ETC_CONF) ] && [ -f $$ex ] && cmp -s $(ETC_CONF) $$ex; then \
		echo "rm -f $(ETC_CONF)"; rm -f $(ETC_CONF); \
	elif [ -e $(ETC_CONF) ]; then \
		echo "kept $(ETC_CONF) (changed since install)"; \
	fi
	rm -f $(DESTDIR)$(DOCDIR)/ringd.conf.example
	@rmdir $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSCONFDIR)/ringd 2>/dev/null || true

# make lint: the shell scripts through shellcheck, the man pages through groff's
# warnings, the relative links of the Markdown (scripts/check-links), the C lines
# this branch changed through clang-format (scripts/check-format), the floors of
# ringd, libring and proto (scripts/check-floors), the bounds of files, functions
# and the README (scripts/check-bounds), the code with every warning as an error (WARN
# above includes -Wredundant-decls -Wcast-qual -Wlogical-op), then the Rust
# (rust-lint in bindings/rust/rust.mk: bindgen's output current, rustfmt,
# clippy).  scripts/install-deps --lint brings the tools.
LINT_SH := $(filter-out scripts/check-floors scripts/check-bounds scripts/check-dashboard,$(wildcard scripts/*)) $(wildcard bindings/*/run-tests) bench/peers bench/ab bench/sweep bench/sweep.sh bench/cores bench/mpi-tcp bench/vs-mpi bench/vs-tls bench/latency-bed bench/wire-compression .ci/run $(wildcard tests/fuzz/*.sh) tests/tsan.sh bindings/rust/ringd-sys/gen-bindings tests/sim/seeded-bugs
# What lint runs, found before anything runs: a missing one is named with the
# command that installs it, not met as a tool's failure halfway (bindgen's
# and clippy's are looked for where rust-lint looks, RUST_LINT_PATH).
BINDGEN   ?= bindgen
export BINDGEN
LINT_TOOLS := shellcheck groff clang-format git-clang-format patch python3 \
	$(BINDGEN) rustfmt $(CARGO) cargo-clippy
.PHONY: lint lint-tools
lint-tools:
	@missing=; for t in $(LINT_TOOLS); do \
		(PATH="$(RUST_LINT_PATH)"; command -v $$t) >/dev/null 2>&1 || missing="$$missing $$t"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make lint: not found:$$missing; scripts/install-deps --lint installs what lint runs" >&2; \
		exit 1; \
	fi

lint: lint-tools
	$(Q)shellcheck $(LINT_SH)
	$(Q)for f in man/*.[0-9]; do \
		w=$$(groff -ww -man -Tutf8 $$f 2>&1 >/dev/null); \
		[ -z "$$w" ] || { echo "$$f: $$w"; exit 1; }; \
	done
	$(call msg,LINKS,Markdown)
	$(Q)scripts/check-links
	$(call msg,FORMAT,C)
	$(Q)scripts/check-format
	$(Q)scripts/check-floors && scripts/check-floors --self-test
	$(Q)scripts/check-bounds && scripts/check-bounds --self-test
	$(call msg,DASHBOARD,systemd/grafana/ringd.json)
	$(Q)scripts/check-dashboard >/dev/null
	$(call msg,PATCHES,tests/sim/bugs)
	$(Q)for p in tests/sim/bugs/*.patch; do \
		patch --dry-run -s -p1 <$$p >/dev/null || \
			{ echo "$$p no longer applies: make it again (tests/sim/seeded-bugs)"; exit 1; }; \
	done
	$(Q)$(MAKE) --no-print-directory WERROR=1 all
	$(Q)$(MAKE) --no-print-directory WERROR=1 rust-lint
	@echo "lint: clean"

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
.SECONDARY:
