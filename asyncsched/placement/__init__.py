"""Out to Placement: the allocation-candidates query, request pre-filters, claims, rollback.

- ``query.build_resource_request(spec, config, ...)`` -> ``ResourceRequest`` (nova's query)
- ``prefilters.run_prefilters(ctx, spec, config, aggregates)`` -> narrowed ``RequestSpec``
- ``client.PlacementClient`` -> ``get_allocation_candidates``, ``claim``, ``rollback``
- ``claims.ClaimBatch`` -> bounded concurrent claims of one multi-create
"""
