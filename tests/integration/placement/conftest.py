from tests.support.placement_server import placement_server  # noqa: F401
