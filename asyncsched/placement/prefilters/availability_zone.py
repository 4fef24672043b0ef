"""map_az_to_placement_aggregate: a requested AZ becomes ``member_of=in:<its aggregates>``."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import require_aggregates


def map_az_to_placement_aggregate(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    az = spec.availability_zone
    if not az:
        return spec
    uuids = [agg.uuid for agg in aggregates if agg.metadata.get("availability_zone") == az]
    # nova adds nothing when no aggregate carries the AZ (e.g. the default AZ).
    return require_aggregates(spec, uuids) if uuids else spec
