"""Request pre-filters (nova's ``scheduler/request_filter.py``), one module each, in nova's order.

Not run here, because they need Neutron: ``routed_networks_filter`` (segment aggregates, off by
default via ``query_placement_for_routed_network_aggregates``) and
``remote_managed_ports_filter`` (asks Neutron each port's vnic_type; the RequestSpec does not
carry it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.accelerators import accelerators_filter
from asyncsched.placement.prefilters.availability_zone import map_az_to_placement_aggregate
from asyncsched.placement.prefilters.base import Prefilter, RequestFilterFailed
from asyncsched.placement.prefilters.compute_status import compute_status_filter
from asyncsched.placement.prefilters.ephemeral_encryption import ephemeral_encryption_filter
from asyncsched.placement.prefilters.image_metadata import transform_image_metadata
from asyncsched.placement.prefilters.image_type import require_image_type_support
from asyncsched.placement.prefilters.isolated_aggregates import isolate_aggregates
from asyncsched.placement.prefilters.owner_nova import owner_nova_filter
from asyncsched.placement.prefilters.packed_virtqueue import packed_virtqueue_filter
from asyncsched.placement.prefilters.tenant_aggregate import require_tenant_aggregate
from asyncsched.placement.prefilters.tpm_secret_security import tpm_secret_security_filter
from asyncsched.placement.prefilters.virtio_sound import virtio_sound_filter

LOG = logging.getLogger(__name__)

__all__ = ["ALL_REQUEST_FILTERS", "Prefilter", "RequestFilterFailed", "run_prefilters"]

#: nova's ALL_REQUEST_FILTERS order, minus the two Neutron-backed ones.
ALL_REQUEST_FILTERS: tuple[Prefilter, ...] = (
    require_tenant_aggregate,
    map_az_to_placement_aggregate,
    require_image_type_support,
    compute_status_filter,
    isolate_aggregates,
    transform_image_metadata,
    accelerators_filter,
    packed_virtqueue_filter,
    ephemeral_encryption_filter,
    virtio_sound_filter,
    tpm_secret_security_filter,
    owner_nova_filter,
)


def run_prefilters(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    """Run every pre-filter in order; a RequestFilterFailed becomes NoValidHost(reason)."""
    for prefilter in ALL_REQUEST_FILTERS:
        t0 = time.perf_counter()
        try:
            new = prefilter(ctx, spec, config, aggregates)
        except RequestFilterFailed as exc:
            raise NoValidHost(reason=exc.reason) from exc
        except NoValidHost:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            # Malformed request data must fail this request, never the service.
            name = getattr(prefilter, "__name__", str(prefilter))
            LOG.exception("Request filter %s failed on a malformed request", name)
            raise NoValidHost(reason=f"Request filter {name} failed: {exc}") from exc
        if new is not spec and LOG.isEnabledFor(logging.DEBUG):
            LOG.debug(
                "Request filter %s changed the request in %.3f ms",
                getattr(prefilter, "__name__", prefilter),
                (time.perf_counter() - t0) * 1000,
            )
        spec = new
    return spec
