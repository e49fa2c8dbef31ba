# dpsilo: plain Makefile.
#
# Sources are discovered by wildcard so that adding a module, a test or a benchmark never needs an edit
# here:
#   <lib>/*.c                -> $(BUILD)/lib<lib>.a        (common accounting estimators federated)
#   service/**/*.c but main.c -> $(BUILD)/libservice.a     (layers in subdirectories: docs/ARCHITECTURE.md)
#   service/main.c           -> $(BUILD)/dpsilod
#   cli/<name>.c             -> $(BUILD)/<name>            (command-line tools, e.g. dpsilo-account)
#   tests/unit/**/test_*.c   -> $(BUILD)/tests/test_*      (one cmocka binary per module; the tree
#                                                          mirrors the sources, binaries stay flat)
#   tests/integration/*.sh   run against $(BUILD)/dpsilod
#   bench/<name>/*.c         -> $(BUILD)/bench/<name>      (bench/<name>/run.sh drives it)
#
# Targets: all (default), deps, run, test, test-clang, unit, integration, soak, asan, tsan, bench,
# bench-build, reproduce, figures, check-deps, format, format-check, clean. .ci/run runs them in CI order.
#
# One build directory per compiler, so gcc and clang objects never mix: gcc (cc) builds in build/,
# `make test CC=clang` (= `make test-clang`) in build-clang/, and the sanitizers in build-asan/,
# build-tsan/ (build-asan-clang/ ... with CC=clang). BUILD=dir overrides.

CC      ?= cc
CC_NAME  = $(notdir $(firstword $(CC)))
CC_TAG   = $(if $(filter cc gcc,$(CC_NAME)),,-$(CC_NAME))
BUILD   ?= build$(CC_TAG)
# -ffp-contract=off is -std=c11's own default, spelt out: the estimators' vector kernels rely on
# no a*b+c being fused, so that their AVX-512, AVX2 and baseline copies give the same bits.
CSTD     = -std=c11 -D_POSIX_C_SOURCE=200809L -ffp-contract=off
WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wvla -Wpointer-arith -Wundef -Wdouble-promotion -fno-common
CFLAGS  ?= -O2 -g -D_FORTIFY_SOURCE=2 -fstack-protector-strong
LDFLAGS ?=
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
VERSION    := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
CPPFLAGS = -I. -DDPSILO_VERSION='"$(VERSION)"' -DDPSILO_GIT_COMMIT='"$(GIT_COMMIT)"'
# CBLAS: OpenBLAS (federated/ multiplies float matrices through it and pins it to one thread, see
# federated/fl_model.h) instead of GSL's reference libgslcblas. Debian's libgsl.so still pulls
# libgslcblas.so in as its own dependency, but the executable's direct -lopenblas comes first in the
# dynamic linker's lookup order, so every cblas_* call, GSL's included, goes to OpenBLAS.
LDLIBS   = -lmicrohttpd -ljansson -lgsl -lopenblas -lsqlite3 -lz -lpthread -lm
ALL_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) -MMD -MP

LIBS      = common accounting estimators federated
lib_srcs  = $(wildcard $(1)/*.c)
lib_objs  = $(patsubst %.c,$(BUILD)/obj/%.o,$(call lib_srcs,$(1)))
# Link order: most dependent first.
LIB_ARCHIVES = $(BUILD)/libservice.a $(BUILD)/libfederated.a $(BUILD)/libestimators.a \
               $(BUILD)/libaccounting.a $(BUILD)/libcommon.a

SERVICE_SRCS = $(filter-out service/main.c,$(sort $(shell find service -name '*.c')))
SERVICE_OBJS = $(patsubst %.c,$(BUILD)/obj/%.o,$(SERVICE_SRCS)) $(BUILD)/obj/gen/embedded.o
# migrations/*.sql, web/* and the OpenAPI document are compiled into the daemon (scripts/embed.sh,
# service/base/embedded.h).
OPENAPI_DOC  = openapi/openapi.json
EMBED_INPUTS = $(sort $(wildcard migrations/*.sql)) $(sort $(wildcard web/*)) $(OPENAPI_DOC)
# The dashboard's charting library (uPlot, docs/DASHBOARD.md) and the browser tests' driver
# (playwright-core) come from the npm registry, pinned by package-lock.json and installed into
# node_modules/ by `npm ci` (make deps; or here, when the build needs them and they are missing).
# uPlot's two dist files are embedded beside web/* and served at /uPlot.iife.min.js, /uPlot.min.css.
NPM_STAMP = node_modules/.package-lock.json
WEB_LIBS  = node_modules/uplot/dist/uPlot.iife.min.js node_modules/uplot/dist/uPlot.min.css
CLI_SRCS     = $(wildcard cli/*.c)
CLI_BINS     = $(patsubst cli/%.c,$(BUILD)/%,$(CLI_SRCS))
UNIT_SRCS    = $(sort $(shell find tests/unit -name 'test_*.c'))
UNIT_BINS    = $(addprefix $(BUILD)/tests/,$(basename $(notdir $(UNIT_SRCS))))
BENCH_DIRS   = $(patsubst bench/%/,%,$(sort $(dir $(wildcard bench/*/*.c))))
BENCH_BINS   = $(patsubst %,$(BUILD)/bench/%,$(BENCH_DIRS))

# clang: the second compiler of `make test-clang` (CI builds and tests with both). zlib: federated/
# reads gzip-compressed IDX files; dataset-fashion-mnist: the Fashion-MNIST files the federated tests
# load when present (/usr/share/datasets/fashion-mnist); chromium: the browser the dashboard's tests
# drive (tests/browser/). Node.js and npm (Debian's nodejs and npm) are installed only when `npm` is
# not on the PATH, so a Node.js from elsewhere is left alone.
DEB_PKGS = build-essential clang libmicrohttpd-dev libjansson-dev libgsl-dev libsqlite3-dev \
           libcmocka-dev curl clang-format sqlite3 python3 jq wrk libopenblas-dev \
           libopenblas0-openmp zlib1g-dev dataset-fashion-mnist chromium

.SECONDARY:

.PHONY: all deps run test test-clang unit unit-build integration soak asan tsan bench bench-build \
        reproduce figures check-deps format format-check clean

all: check-deps $(BUILD)/gen/version.stamp $(BUILD)/dpsilod $(CLI_BINS)

# ---- libraries --------------------------------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

define lib_rule
$(BUILD)/lib$(1).a: $(call lib_objs,$(1))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach l,$(LIBS),$(eval $(call lib_rule,$(l))))

$(BUILD)/gen/embedded.c: scripts/embed.sh $(EMBED_INPUTS) $(NPM_STAMP)
	@mkdir -p $(dir $@)
	sh scripts/embed.sh $@ migrations web $(OPENAPI_DOC) $(WEB_LIBS)

# npm ci writes node_modules/.package-lock.json last; touched so a lock file edited since is seen.
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

$(BUILD)/obj/gen/embedded.o: $(BUILD)/gen/embedded.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# version.o carries the commit and VERSION as -D flags: rebuild it whenever they change (the stamp is
# rewritten only when its content differs), so /v1/version never reports a stale commit.
$(BUILD)/gen/version.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION) $(GIT_COMMIT)' >$@.tmp; cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(BUILD)/obj/service/base/version.o: $(BUILD)/gen/version.stamp
.PHONY: FORCE
FORCE:

$(BUILD)/libservice.a: $(SERVICE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/dpsilod: $(BUILD)/obj/service/main.o $(LIB_ARCHIVES)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_ARCHIVES) $(LDLIBS)

$(BUILD)/dpsilo-%: $(BUILD)/obj/cli/dpsilo-%.o $(LIB_ARCHIVES)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_ARCHIVES) $(LDLIBS)

# One rule per unit test: tests/unit/<dir>/test_x.c -> $(BUILD)/tests/test_x.
define unit_rule
$(BUILD)/tests/$(basename $(notdir $(1))): $(BUILD)/obj/$(1:.c=.o) $(LIB_ARCHIVES)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$< $$(LIB_ARCHIVES) $$(LDLIBS) -lcmocka
endef
$(foreach t,$(UNIT_SRCS),$(eval $(call unit_rule,$(t))))

.SECONDEXPANSION:
# No '%' inside the secondary expansion: make would replace it by the stem (the objects list came out
# empty and bench binaries failed to link); $$* is the stem there.
$(BUILD)/bench/%: $$(addprefix $(BUILD)/obj/,$$(subst .c,.o,$$(wildcard bench/$$*/*.c))) $(LIB_ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB_ARCHIVES) $(LDLIBS)

# ---- set-up -------------------------------------------------------------------------------------------
# Installs only what is missing; uses sudo when not root.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@$(MAKE) --no-print-directory $(NPM_STAMP)

LISTEN ?= 127.0.0.1:8080
DB     ?= ./var/dpsilo.db
# `make run` is for local development: AUTH=off, no bearer tokens (the daemon prints a loud warning,
# and refuses --auth off on a non-loopback address). `make run AUTH=on` to use tokens: the admin token
# is then in $(dir $(DB))admin.token (the daemon logs the path). Each setting is its own variable, so
# overriding one never changes another: RUN_FLAGS holds only extra flags (RUN_FLAGS="--threads 4").
# AUTH is set with = (not ?=): only the command line overrides it, not an AUTH environment variable.
AUTH       = off
RUN_FLAGS ?=
run: deps all
	@case "$(AUTH)" in on|off) ;; *) echo "make run: AUTH must be on or off (got '$(AUTH)')"; exit 2;; esac
	@mkdir -p $(dir $(DB))
	@if [ "$(AUTH)" = on ]; then echo "make run: auth on; the admin token is in $(dir $(DB))admin.token unless RUN_FLAGS sets --admin-token-file"; fi
	./$(BUILD)/dpsilod --listen $(LISTEN) --db $(DB) --auth $(AUTH) $(RUN_FLAGS)

# ---- tests --------------------------------------------------------------------------------------------
# UNIT_TESTS selects unit-test binaries (default: all), e.g. the subset `make tsan` runs.
UNIT_TESTS ?= $(UNIT_BINS)
# ThreadSanitizer runs what has more than one thread, to keep CI within its 30 minutes (TSan slows
# code 5-15x):
#   - unit tests: all but accounting/ and estimators/. Those libraries may not use threads (check-deps
#     rule 3), so their tests are single-threaded by construction; they run in the gcc, clang and
#     ASan stages. test_service_chaos too: it fails each allocation of every route in turn, one
#     request at a time (ASan's business; under TSan it took 61 s of the stage's budget).
#   - integration: the scripts that drive the daemon's threads together: concurrent requests and
#     SIGTERM in flight, 32 connections charging one silo, kill -9 during a storm, the ledger's PLD
#     thread, the drain under load, slow and hostile clients, the fuzz, an estimator answer written
#     on the HTTP thread while it is sent (hung up on mid-answer). The others check one route's
#     answers. test_estimator_runs.sh is left out: its stop section expects two long runs to reach
#     the compute pool within 1 s of being sent, which TSan's slowdown breaks (the stop is then
#     forced after the 60 s drain); the pool's threads are covered by test_service_compute here.
# `make tsan TSAN_ALL=1` runs the whole suite. (Defined before the unit rule: its prerequisites
# are expanded where it is read.)
TSAN_SKIP_UNIT  = test_accounting_% test_estimators_% test_service_chaos
TSAN_UNIT_TESTS = $(foreach t,$(UNIT_BINS),$(if $(filter $(TSAN_SKIP_UNIT),$(notdir $(t))),,$(t)))
TSAN_INTEGRATION_TESTS = $(addprefix tests/integration/test_,daemon_lifecycle.sh \
    ledger_concurrency.sh ledger_crash.sh ledger_rules.sh http_stop.sh http_slow.sh \
    hostile_http.sh fuzz.sh estimator_stream.sh)

# Build in parallel (make -j), then run the unit tests and the integration scripts one after the other:
# never both at once, even under -j (the integration scripts start daemons and watch their timing).
test: deps
	$(MAKE) all unit-build
	$(MAKE) unit
	$(MAKE) integration

# The same suite built with clang, in build-clang/ (the warning set and -Werror are the same).
test-clang:
	$(MAKE) CC=clang test

unit-build: $(UNIT_TESTS)

# The unit binaries are independent processes (temporary directories of their own, port 0, no
# timing in any assertion), so they run UNIT_JOBS at a time (default: one per core); each one's
# output is kept in $(BUILD)/unit-logs/ and printed whole, in the list's order, when all are done.
UNIT_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
unit: $(UNIT_TESTS)
	@rm -rf $(BUILD)/unit-logs && mkdir -p $(BUILD)/unit-logs; \
	printf '%s\n' $(UNIT_TESTS) | xargs -P $(UNIT_JOBS) -I{} sh -c \
	  't={}; l=$(BUILD)/unit-logs/$${t##*/}.log; t0=$$(date +%s); r=0; "$$t" >"$$l" 2>&1 || r=1; \
	   echo "   ($$t: $$(( $$(date +%s) - t0 )) s$$([ $$r = 0 ] || echo ", FAILED"))" >>"$$l"; exit $$r'; \
	fail=$$?; \
	for t in $(UNIT_TESTS); do echo "== $$t"; cat "$(BUILD)/unit-logs/$${t##*/}.log"; done; \
	if [ $$fail -ne 0 ]; then echo "unit tests FAILED:"; grep -l ", FAILED)" $(BUILD)/unit-logs/*.log; exit 1; fi

# INTEGRATION_TESTS selects scripts (default: all), e.g. the subset `make tsan` runs.
INTEGRATION_TESTS ?= $(sort $(wildcard tests/integration/test_*.sh))
integration: $(BUILD)/dpsilod $(CLI_BINS)
	@fail=0; pass=0; nfail=0; for t in $(INTEGRATION_TESTS); do \
	  echo "== $$t"; t0=$$(date +%s); \
	  if BUILD=$(BUILD) DPSILOD=$(BUILD)/dpsilod bash $$t; then pass=$$((pass+1)); else fail=1; nfail=$$((nfail+1)); fi; \
	  echo "   ($$t: $$(( $$(date +%s) - t0 )) s)"; \
	done; \
	echo "integration: $$pass passed, $$nfail failed"; \
	exit $$fail

# The long forms of the stop, slow-client and hostile-HTTP probes (not part of `make test`, which runs
# the short ones): 100 SIGTERM stops under load with the epoll timing shim, 1,100 slow connections, and
# a minute of hostile probes from 4 workers. Each is bounded by `timeout`, all three by 7 minutes.
SOAK_STOP_ROUNDS ?= 100
SOAK_SLOW_CONNS  ?= 1100
SOAK_HOSTILE_SECONDS ?= 60
soak: $(BUILD)/dpsilod
	@fail=0; \
	echo "== soak: $(SOAK_STOP_ROUNDS) shimmed stops under load"; \
	STOP_ROUNDS=$(SOAK_STOP_ROUNDS) BUILD=$(BUILD) DPSILOD=$(BUILD)/dpsilod \
	  timeout 210 bash tests/integration/test_http_stop.sh || fail=1; \
	echo "== soak: $(SOAK_SLOW_CONNS) slow connections"; \
	SLOW_CONNS=$(SOAK_SLOW_CONNS) BUILD=$(BUILD) DPSILOD=$(BUILD)/dpsilod \
	  timeout 80 bash tests/integration/test_http_slow.sh || fail=1; \
	echo "== soak: hostile HTTP probes for $(SOAK_HOSTILE_SECONDS) s from 4 workers, fds and RSS watched"; \
	HOSTILE_SECONDS=$(SOAK_HOSTILE_SECONDS) BUILD=$(BUILD) DPSILOD=$(BUILD)/dpsilod \
	  timeout $$(( $(SOAK_HOSTILE_SECONDS) + 60 )) bash tests/integration/test_hostile_http.sh || fail=1; \
	if [ $$fail -ne 0 ]; then echo "soak FAILED"; exit 1; fi

# The sanitizer builds also compile in the DP_ASSERT invariants (common/dp_assert.h); `make` leaves
# them out (not evaluated).
SAN_FLAGS = -O1 -g -fno-omit-frame-pointer -DDPSILO_ASSERT
ASAN_MAKE = $(MAKE) BUILD=build-asan$(CC_TAG) LDFLAGS="-fsanitize=address,undefined" \
            CFLAGS="$(SAN_FLAGS) -fsanitize=address,undefined -fno-sanitize-recover=all"
asan: deps
	$(ASAN_MAKE) all unit-build
	$(ASAN_MAKE) unit
	$(ASAN_MAKE) integration

TSAN_SELECT = $(if $(TSAN_ALL),,UNIT_TESTS='$$(TSAN_UNIT_TESTS)' \
                INTEGRATION_TESTS='$$(TSAN_INTEGRATION_TESTS)')
TSAN_MAKE = $(MAKE) BUILD=build-tsan$(CC_TAG) LDFLAGS="-fsanitize=thread" \
            CFLAGS="$(SAN_FLAGS) -fsanitize=thread"
tsan: deps
	$(TSAN_MAKE) all unit-build $(TSAN_SELECT)
	$(TSAN_MAKE) unit $(TSAN_SELECT)
	$(TSAN_MAKE) integration $(TSAN_SELECT)

# Builds every benchmark without running it (CI keeps them compiling); `make bench` also runs them.
bench-build: $(BENCH_BINS)

bench: all bench-build
	@for d in $(sort $(wildcard bench/*/run.sh)); do echo "== $$d"; BUILD=$(BUILD) bash $$d || exit 1; done

# Reproduction of Liu et al., NeurIPS 2022 (docs/REPRODUCTION.md): several minutes, never part of
# test or CI. PART=school|synth|fmnist|ppsgd|altmin|altmin-alg1|altmin-scaling|adaped|ifca|adamix|
# fedhdp_r6 runs one part (default all: the first three). The School CSV is not in the
# repository: DPSILO_SCHOOL_CSV names it (default ../shared/data/school/school.csv from here).
PART ?= all
DPSILO_SCHOOL_CSV ?= ../shared/data/school/school.csv
reproduce: $(BUILD)/bench/reproduce
	DPSILO_SCHOOL_CSV=$(DPSILO_SCHOOL_CSV) $(BUILD)/bench/reproduce $(PART)

# The figures of docs/ESTIMATORS.md (docs/img/eb-central-mse.{csv,svg}, normal-means-shrinkage.svg),
# drawn by scripts/svgplot.py (Python's standard library only) from bench/eb_central's CSV and from a
# fresh daemon's normal-means answers: deterministic, about 15 s. REPS=n sets eb_central's
# repetitions floor (default 200). Not part of test or CI; tests/integration/test_svgplot.sh checks
# the drawing script.
figures: $(BUILD)/bench/eb_central $(BUILD)/dpsilod
	BUILD=$(BUILD) bash scripts/figures.sh

# ---- hygiene ------------------------------------------------------------------------------------------
# Dependency direction (docs/ARCHITECTURE.md): service-only headers, library layering, no threads in
# accounting/estimators, libraries never print. The rules are listed in scripts/check-deps.sh.
check-deps:
	@sh scripts/check-deps.sh .

FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	clang-format --dry-run -Werror $(FORMAT_SRCS)

clean:
	rm -rf build build-*

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
