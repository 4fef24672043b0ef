from tests.fixtures.placement_server import placement_server  # noqa: F401
