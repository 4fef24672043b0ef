"""isolate_aggregates: forbid aggregates whose ``trait:X=required`` the request does not ask for."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import forbid_aggregates
from asyncsched.placement.query import from_request_spec


def isolate_aggregates(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if not config.scheduler.enable_isolated_aggregate_filtering:
        return spec
    requested = {f"trait:{t}" for t in from_request_spec(spec).all_required_traits}
    # nova's get_non_matching_by_metadata_keys(keys, 'trait:', value='required').
    isolated = [
        agg.uuid
        for agg in aggregates
        if any(
            k.startswith("trait:") and v == "required" and k not in requested
            for k, v in agg.metadata.items()
        )
    ]
    return forbid_aggregates(spec, isolated) if isolated else spec
