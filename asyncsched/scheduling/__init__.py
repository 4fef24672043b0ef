"""The decision: nova's filter scheduler (filters, weighers, select_destinations).

Public entry points:

- ``interfaces.Strategy``: a decision driver behind the RPC layer's SchedulerAPI
  (``select_destinations``), ``reconfigure(config)`` on SIGHUP, ``diagnostics.recent()``.
- ``manager.SchedulerManager(config, cache, placement)``: the filter scheduler; each call is a
  ``request_run.RequestRun``.
- ``chance.ChanceScheduler``: ``[asyncsched] driver = chance``.
- ``loader.load_filters(config)`` / ``loader.load_weighers(config)``: plugin resolution
  (raises ConfigError), also usable by ``check-config``.
- ``engine.DecisionEngine``: the I/O-free decision path (filter, weigh, pick).

The per-host nova-style implementation the engine is tested against is
``bench.reference_scheduler``. See README.md in this folder for the module map.
"""
