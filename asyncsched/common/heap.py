"""Long-lived builds out of the cyclic collector's reach, as the start-up heap is.

The daemon freezes what start-up built (``service.freeze_start_up_heap``). What it builds
later and keeps is young to the collector: an answer over 100,000 roots makes three
containers a root for its allocation requests, and the next gen-1 collection walked them in
one piece (95-250 ms at 100,000 hosts), every full collection after it again (up to 0.8 s
with six flavors' answers). A builder reports the objects it made that live on
(:meth:`HeapKeeper.made`); past ``KEEP_AT`` of them since the last freeze the young heap is
frozen too, so no collection walks more than about that many of them.

What it costs: cyclic garbage that is young at a freeze is never collected (freezing moves
every tracked object; reference counts still free everything else, frozen or not). The state
is values and dicts; ``bench/bench_gc_holds.py`` counts what the frozen heap held at its end,
and ``asyncsched_gc_frozen_objects`` shows the frozen heap's size (it falls as frozen objects
are freed). Process-wide, as the collector is: only the daemon turns it on
(``service.freeze_start_up_heap``); elsewhere ``made`` only counts.
"""

from __future__ import annotations

import gc
import logging

LOG = logging.getLogger(__name__)

#: objects reported made since the last freeze that make the next one (a gen-1 collection
#: walks about 10x the daemon's young threshold of 50,000 objects: this many of them are
#: builds at most)
KEEP_AT = 100_000


class HeapKeeper:
    """Counts what builds made; freezes the young heap past ``KEEP_AT`` when enabled."""

    __slots__ = ("_since", "enabled", "freezes")

    def __init__(self) -> None:
        self.enabled = False
        self.freezes = 0
        self._since = 0

    def made(self, objects: int) -> None:
        """A build made ``objects`` container objects that it keeps (an estimate: its
        allocation requests, summaries)."""
        self._since += objects
        if self.enabled and self._since >= KEEP_AT:
            self.freeze()

    def freeze(self) -> None:
        """The young heap out of the collector's reach (``gc.freeze`` moves lists: O(1))."""
        LOG.debug("young heap frozen after %d objects built", self._since)
        gc.freeze()
        self.freezes += 1
        self._since = 0


#: the process's keeper (the collector is process-wide)
KEEPER = HeapKeeper()
