"""Bottom-layer helpers (no asyncsched imports): one concern per module, usable by every layer."""
