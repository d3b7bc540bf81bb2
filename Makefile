# Two entry points for a fresh machine (see README "Quick start"):
#   make demo   runs the daemon on a simulated shoe with an embedded broker
#   make test   lints, type-checks and runs the whole test suite
# Both create .venv and install the project into it on first use.

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: demo demo-console test lint venv system-deps

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

venv: $(STAMP)

# Tests start their own mosquitto; install the broker binary when it is missing.
system-deps:
	@bash .ci/system-deps

demo: $(STAMP)
	$(BIN)/baccarat-edge demo

# The demo table with the pit console on it: http://127.0.0.1:8080/ (daemon/console/README.md)
demo-console: $(STAMP)
	$(BIN)/baccarat-edge console --demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: $(STAMP) system-deps lint
	$(BIN)/python -m pytest -q

# The Debian package build/deb/baccarat-edge_<version>_<arch>.deb (systemd/README.md).
.PHONY: deb
deb: system-deps
	bash systemd/build-deb.sh
