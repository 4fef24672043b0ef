"""Developer tools: the demo, the nova parity harness."""
