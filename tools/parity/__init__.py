"""Decision-by-decision comparison of asyncsched with nova 34 (make parity)."""
