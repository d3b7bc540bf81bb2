# Two entry points for a fresh machine (see README "Quick start"):
#   make demo   runs the daemon on a simulated shoe with an embedded broker
#   make test   lints, type-checks and runs the whole test suite (the gate)
# Both create .venv and install the project into it on first use.
# For the inner loop (README "Tests"):
#   make test-fast     ruff and the fast lane: no slow, browser, packaging or restart tests
#   make test-explore  the property tests with many more examples at one seed (SEED=n)

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: demo demo-console test test-fast test-explore lint venv system-deps

# Three workers on the two cores (the tests are isolated: own ports, own temporary folders; most
# of their time is spent waiting on daemons, brokers and ptys, so a third worker fills the idle
# time: the whole suite took 8 min 22 s on two workers, 5 min 30 s on three, same tree, quiet
# machine); a test module stays on one worker, so a module's own broker or built package is made once.
PYTEST_WORKERS ?= 3
# Keep byte code: pytest's rewritten test modules (collecting 1,460 tests takes 4x longer
# without them) and the daemon's own modules (the tests start `baccarat-edge run` often).
unexport PYTHONDONTWRITEBYTECODE
PYTEST := $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15
FAST_LANE := not slow and not browser and not packaging and not restarts
ifndef SEED
SEED := $(shell od -An -N2 -tu2 /dev/urandom | tr -d ' ')
endif

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

# The system packages the tests need (.ci/system-deps): installed when missing as root, else
# the apt-get line to run is printed and make stops.
system-deps:
	@bash .ci/system-deps test

demo: $(STAMP)
	$(BIN)/baccarat-edge demo

# The demo table with the pit console on it: http://127.0.0.1:8080/ (daemon/console/README.md)
demo-console: $(STAMP)
	$(BIN)/baccarat-edge console --demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: system-deps $(STAMP) lint
	$(PYTEST)

# mypy is left to `make test` and `make lint`: it takes longer than the whole fast lane.
test-fast: $(STAMP)
	@bash .ci/system-deps fast
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PYTEST) -m "$(FAST_LANE)"

test-explore: $(STAMP)
	@bash .ci/system-deps fast
	@echo "hypothesis seed $(SEED) (again: make test-explore SEED=$(SEED))"
	HYPOTHESIS_PROFILE=explore $(PYTEST) -m hypothesis --hypothesis-seed=$(SEED)

# The Debian package build/deb/baccarat-edge_<version>_<arch>.deb (systemd/README.md); needs
# ATTESTATION_KEY_FILE, the path of the Ed25519 build key that signs its manifest of files.
.PHONY: deb
deb:
	@bash .ci/system-deps deb
	bash systemd/build-deb.sh
