"""require_image_type_support: ``COMPUTE_IMAGE_TYPE_<disk_format>`` on the root provider."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import add_root_required
from asyncsched.placement.traits import KNOWN_TRAITS

LOG = logging.getLogger(__name__)


def require_image_type_support(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if not config.scheduler.query_placement_for_image_type_support or spec.is_bfv:
        return spec
    disk_format = spec.image.disk_format if spec.image is not None else None
    if not disk_format:
        return spec
    trait = f"COMPUTE_IMAGE_TYPE_{disk_format.upper()}"
    if trait not in KNOWN_TRAITS:
        LOG.error("Computed trait name %r is not valid; is os-traits up to date?", trait)
        return spec
    return add_root_required(spec, trait)
