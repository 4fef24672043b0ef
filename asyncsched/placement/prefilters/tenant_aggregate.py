"""require_tenant_aggregate: keep a tenant on aggregates tagged filter_tenant_id*=<project>."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import RequestFilterFailed, require_aggregates

LOG = logging.getLogger(__name__)
TENANT_METADATA_KEY = "filter_tenant_id"


def require_tenant_aggregate(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if not config.scheduler.limit_tenants_to_placement_aggregate:
        return spec
    project = spec.project_id
    # nova: aggregates having any metadata value == project_id, then any key filter_tenant_id*.
    uuids = sorted(
        agg.uuid
        for agg in aggregates
        if project is not None
        and project in agg.metadata.values()
        and any(k.startswith(TENANT_METADATA_KEY) for k in agg.metadata)
    )
    if uuids:
        return require_aggregates(spec, uuids)
    if config.scheduler.placement_aggregate_required_for_tenants:
        LOG.warning("Tenant %s has no available aggregates", project)
        raise RequestFilterFailed("No hosts available for tenant")
    return spec
