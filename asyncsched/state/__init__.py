"""Host state: the in-memory mirror of nova's cell databases and of Placement's providers."""
