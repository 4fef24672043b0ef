"""The nova operations of :mod:`tests.integration.nova.scenarios` on a plane of their own,
served by asyncsched-mirror."""

from tests.integration.nova.scenarios import *  # noqa: F403

#: Read by the ``scheduler`` fixture (conftest.py): the process on the ``scheduler`` topic.
SCHEDULER = "asyncsched-mirror"
