"""One real nova 34 control plane per test module, served by the module's scheduler.

``plane`` starts nova-api, nova-conductor, five computes, cells, Placement, a RabbitMQ vhost and
the databases once per module (half a minute on a quiet machine); ``scheduler`` starts the
process named by the module's ``SCHEDULER`` on the ``scheduler`` topic. The scenarios are
written once (``scenarios.py``) and imported by one file per scheduler, so ``-n 3 --dist
loadfile`` runs the three schedulers side by side, each with its own plane.

``ASYNCSCHED_NOVA_DB=mysql`` (``make e2e-nova DB=mysql``) puts the plane's databases (nova's
API, cell0 and cell, Placement's) on MariaDB, made by nova-manage and placement-manage.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.integration.nova.servers import Servers
from tests.support.nova_control_plane import SCHEDULERS, ControlPlane
from tests.support.nova_db import BACKENDS, Backend


@pytest.fixture(scope="module")
def db_backend() -> Backend:
    """Where the plane's databases are: PostgreSQL, or MariaDB with ASYNCSCHED_NOVA_DB=mysql."""
    wanted = os.environ.get("ASYNCSCHED_NOVA_DB", "postgresql")
    assert wanted in BACKENDS, f"ASYNCSCHED_NOVA_DB={wanted!r}: one of {BACKENDS}"
    return "mysql" if wanted == "mysql" else "postgresql"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory, db_backend: Backend) -> Iterator[ControlPlane]:
    cp = ControlPlane(tmp_path_factory.mktemp("nova-plane"), db_backend)
    try:
        cp.start()
        yield cp
    except BaseException:
        print(cp.logs())
        raise
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def scheduler(request: pytest.FixtureRequest, plane: ControlPlane) -> Iterator[ControlPlane]:
    """The plane with the module's ``SCHEDULER`` (one of :data:`SCHEDULERS`) on the
    ``scheduler`` topic."""
    kind = getattr(request.module, "SCHEDULER", None)
    assert kind in SCHEDULERS, f"{request.module.__name__}.SCHEDULER={kind!r}: one of {SCHEDULERS}"
    plane.use_scheduler(str(kind))
    yield plane
    plane.stop_scheduler()


@pytest.fixture
def nova(scheduler: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Servers]:
    """Servers on the plane; everything the test created is deleted after it, and the
    services are back to enabled and up; the logs are printed when the test failed."""
    servers = Servers(scheduler)
    yield servers
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(scheduler.logs())
    scheduler.reset_services()
    servers.delete_created()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{rep.when}", rep)
