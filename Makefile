# The two set-up commands of the README:
#   make demo   local stack (RabbitMQ, PostgreSQL, real Placement) + seeded demo cloud +
#               asyncsched + a batch boot through the real oslo.messaging client
#               (make demo DB=mysql: the databases on MariaDB)
#   make test   the whole test suite (ruff, mypy, pytest), as CI runs it
# Issue #13 at full size (not part of make test, which runs them at CI size):
#   make chaos  fault tests at the big sizes (200 calls in flight, ...), figures printed
#   make fuzz   100,000 fuzzed messages and the hostile corpus at 12 MiB against the daemon
#   make soak   bench/soak.py, 30 minutes of mixed traffic (SOAK_MINUTES=5 for less)
.PHONY: demo test lint unit bench sample parity keystone nova chaos fuzz soak e2e-nova

VENV := .venv/bin

$(VENV)/python: pyproject.toml constraints.txt
	tools/bootstrap.sh

bootstrap:
	tools/bootstrap.sh

services:
	tools/services.sh

# DB=mysql: nova's and Placement's databases on MariaDB instead of PostgreSQL.
DB ?= postgresql
demo: bootstrap services
	$(VENV)/python tools/demo.py --db $(DB)

lint: bootstrap
	$(VENV)/ruff check .
	$(VENV)/mypy

# nova 34 itself (PyPI) in .venv-nova: the parity tests, the control plane and a unit test that
# checks extra_specs_ops against nova's own module need it before the unit phase.
nova:
	tools/nova_venv.sh

# The real keystone (PyPI) in its own venv, .venv-keystone, for the keystone auth tests.
keystone:
	tools/keystone_venv.sh

# make test runs in phases, each announcing itself, quick ones first: lint, then the unit tests
# (about a minute), then everything that talks to real peers (tests/ minus tests/unit).
# pytest's exit 5 (no tests collected) is not a failure of a phase; every other is.
# The integration phase runs on three pytest-xdist workers (TEST_WORKERS), a whole test file per
# worker at a time (--dist loadfile: module fixtures such as the nova control plane stay on one
# worker), the longest files first (tests/conftest.py). The phase mostly waits on real peers,
# so three workers pay on two cores: the nova control-plane file alone is about as long as
# everything else shared by the two other workers (docs/benchmarks.md, "Test suite", for the
# figures and why not 2 or 4). TEST_WORKERS=0 runs it in this process. The ten slowest tests
# are listed at the end.
PYTEST := $(VENV)/pytest -q -p no:cacheprovider
TEST_WORKERS ?= 3
PHASE = @echo; echo "=== make test: $(1) ($$(date -u +%H:%M:%S)) ==="
test: bootstrap services keystone nova
	$(call PHASE,1/3 lint: ruff and mypy)
	$(VENV)/ruff check .
	$(VENV)/mypy
	$(call PHASE,2/3 unit tests: tests/unit)
	$(PYTEST) -m "not chaos_big" tests/unit || [ $$? -eq 5 ]
	$(call PHASE,3/3 integration: RabbitMQ / PostgreSQL / Placement / nova / Prometheus)
	$(PYTEST) -m "not chaos_big" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--durations=10 --ignore=tests/unit tests || [ $$? -eq 5 ]

unit: bootstrap
	$(PYTEST) tests/unit

bench: bootstrap services
	$(VENV)/python -m bench

# Differential run against upstream nova 34 (installed into .venv-nova by tools/nova_venv.sh);
# tests/parity runs the same at CI size.
parity: bootstrap
	tools/nova_venv.sh
	$(VENV)/python -m tools.parity.run --cases 2000 --hosts 12

# Issue #20 alone: every nova operation under the real nova 34 control plane (nova-api,
# nova-conductor, fake computes), each scenario against nova-scheduler, asyncsched and
# asyncsched with the Placement mirror (also part of make test). docs/nova-operations.md.
# DB=mysql: the plane's databases (nova's and Placement's) on MariaDB.
e2e-nova: bootstrap services
	tools/nova_venv.sh
	ASYNCSCHED_NOVA_DB=$(DB) $(VENV)/pytest -p no:cacheprovider --durations=10 tests/integration/nova

sample: bootstrap
	$(VENV)/asyncsched generate-sample > config/asyncsched.conf.sample

chaos: bootstrap services
	ASYNCSCHED_CHAOS_BIG=1 $(VENV)/pytest -s -p no:cacheprovider tests/integration/chaos

# The hostile corpus (issue #21) at 12 MiB a case: its table of loop holds goes in
# docs/hostile-input.md.
fuzz: bootstrap services
	ASYNCSCHED_FUZZ_EXAMPLES=12500 ASYNCSCHED_CORPUS_BYTES=12582912 \
		$(VENV)/pytest -s -p no:cacheprovider tests/integration/fuzz

SOAK_MINUTES ?= 30
soak: bootstrap services
	$(VENV)/python -m bench.soak --minutes $(SOAK_MINUTES)
