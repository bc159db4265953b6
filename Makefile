# AccountLifecycle — `make run` and `make test` do all set-up on a fresh Debian 12 machine.
SHELL := /bin/bash
.DEFAULT_GOAL := run

# `make run` installs only what building and running need: the C libraries the package
# links. `make test` adds the independent readers and reference tools the tests compare
# against and the servers they start (PostgreSQL, PgBouncer, nginx, Chromium…); `make bench`
# adds the job queues it measures against.
RUN_APT_PACKAGES := pkg-config zlib1g-dev libsqlite3-dev libvips-dev libarchive-dev libcrypt-dev libargon2-dev
TEST_APT_PACKAGES := sqlite3 libvips-tools libheif-examples libarchive-tools \
	unzip python3 python3-venv libimage-exiftool-perl imagemagick hyperfine time \
	postgresql pgbouncer curl nginx-light wrk chromium tesseract-ocr tesseract-ocr-eng w3m strace systemd
# The S3 tests' local server, the JSON Schema checker of the CLI's --json output and
# schemathesis (the app API against its OpenAPI document) and websockets (drives headless
# Chromium over its DevTools protocol for the dashboard test), from PyPI, in a virtual
# environment inside the repository (ignored by git) so nothing is installed into the
# system's Python.
TOOLS_VENV := .build-tools/venv
MOTO_SERVER := $(TOOLS_VENV)/bin/moto_server
MOTO_REQUIREMENT := moto[server]>=5,<6
JSONSCHEMA_REQUIREMENT := jsonschema>=4.18,<5
SCHEMATHESIS_REQUIREMENT := schemathesis>=4,<5
WEBSOCKETS_REQUIREMENT := websockets>=13,<16
# The example Django project (Jobs/examples/django): a real Django + django-allauth schema,
# migrated for real on SQLite or PostgreSQL, that the purge tests build on (socialaccount:
# allauth's extra for its providers: requests, oauthlib, PyJWT; Pillow for ImageField), and
# the API token libraries the token tests add to it (Tests/CLITests/DjangoTokens).
DJANGO_REQUIREMENTS := Django>=5.2,<5.3 django-allauth[socialaccount]>=65,<66 psycopg[binary]>=3.2,<4 Pillow>=10,<14 \
	djangorestframework>=3.15,<4 djangorestframework-simplejwt>=5.5,<6 django-rest-knox>=5.1,<6
# django-oscar from PyPI (Tests/Fixtures/oscar_site), in a virtual environment of its own:
# a real shop whose schema nobody here designed, on which `map init --django` is checked
# against Django's own delete().
OSCAR_VENV := .build-tools/oscar-venv
OSCAR_REQUIREMENTS := Django>=5.2,<5.3 django-oscar>=4.2,<4.3 sorl-thumbnail>=12.10,<13 psycopg[binary]>=3.2,<4
# `make bench` only: the job queues the runner is measured against, in the same venv.
PGQUEUER_REQUIREMENT := pgqueuer[asyncpg]==1.6.0
HUEY_REQUIREMENT := huey>=2.5,<3
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SWIFT_BUILD_FLAGS ?=
BIN := .build/debug/lifecycle
DEMO_DIR := demo

.PHONY: deps example-deps test-deps bench-deps build run test bench clean

# Installs the Debian packages named in $(1) that are missing, with sudo unless root.
define apt_install
	@missing=$$(for package in $(1); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || echo $$package; done); \
	if [ -n "$$missing" ]; then \
		echo "installing missing packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(RUN_APT_PACKAGES))

# The example Django project's virtual environment (Jobs/examples/django, the walk-throughs).
example-deps:
	$(call apt_install,python3 python3-venv sqlite3)
	@if ! $(TOOLS_VENV)/bin/python -c 'import django, allauth, psycopg, oauthlib, jwt, PIL, rest_framework, rest_framework_simplejwt, knox' 2>/dev/null; then \
		echo "installing $(DJANGO_REQUIREMENTS) into $(TOOLS_VENV)"; \
		python3 -m venv $(TOOLS_VENV) && \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check $(foreach requirement,$(DJANGO_REQUIREMENTS),'$(requirement)'); \
	fi

test-deps: deps example-deps
	$(call apt_install,$(TEST_APT_PACKAGES))
	@if [ ! -x $(MOTO_SERVER) ]; then \
		echo "installing $(MOTO_REQUIREMENT) into $(TOOLS_VENV)"; \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check '$(MOTO_REQUIREMENT)'; \
	fi
	@if ! $(TOOLS_VENV)/bin/python -c 'import jsonschema' 2>/dev/null; then \
		echo "installing $(JSONSCHEMA_REQUIREMENT) into $(TOOLS_VENV)"; \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check '$(JSONSCHEMA_REQUIREMENT)'; \
	fi
	@if [ ! -x $(TOOLS_VENV)/bin/st ]; then \
		echo "installing $(SCHEMATHESIS_REQUIREMENT) into $(TOOLS_VENV)"; \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check '$(SCHEMATHESIS_REQUIREMENT)'; \
	fi
	@if ! $(TOOLS_VENV)/bin/python -c 'import websockets' 2>/dev/null; then \
		echo "installing $(WEBSOCKETS_REQUIREMENT) into $(TOOLS_VENV)"; \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check '$(WEBSOCKETS_REQUIREMENT)'; \
	fi
	@if ! $(OSCAR_VENV)/bin/python -c 'import oscar, sorl.thumbnail, psycopg' 2>/dev/null; then \
		echo "installing $(OSCAR_REQUIREMENTS) into $(OSCAR_VENV)"; \
		python3 -m venv $(OSCAR_VENV) && \
		$(OSCAR_VENV)/bin/pip install --quiet --disable-pip-version-check $(foreach requirement,$(OSCAR_REQUIREMENTS),'$(requirement)'); \
	fi

bench-deps: test-deps
	@if ! $(TOOLS_VENV)/bin/python -c 'import pgqueuer, asyncpg' 2>/dev/null; then \
		echo "installing $(PGQUEUER_REQUIREMENT) into $(TOOLS_VENV)"; \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check '$(PGQUEUER_REQUIREMENT)'; \
	fi
	@if [ ! -x $(TOOLS_VENV)/bin/huey_consumer ]; then \
		echo "installing $(HUEY_REQUIREMENT) into $(TOOLS_VENV)"; \
		$(TOOLS_VENV)/bin/pip install --quiet --disable-pip-version-check '$(HUEY_REQUIREMENT)'; \
	fi

build: deps
	swift build $(SWIFT_BUILD_FLAGS)

# The tour: a fresh embedded installation (SQLite file + blob directory) under ./demo.
run: build
	rm -rf $(DEMO_DIR)
	$(BIN) demo --database $(DEMO_DIR)/lifecycle.sqlite --blobs $(DEMO_DIR)/blobs --jobs-dir Jobs

test: test-deps
	swift build --build-tests $(SWIFT_BUILD_FLAGS)
	SWIFT_BUILD_FLAGS='$(SWIFT_BUILD_FLAGS)' scripts/test.sh

bench: bench-deps
	scripts/bench.sh

clean:
	rm -rf .build $(DEMO_DIR)
