"""transform_image_metadata: image ``hw_*`` bus/model/arch properties become required traits."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import add_root_required
from asyncsched.placement.traits import KNOWN_TRAITS

LOG = logging.getLogger(__name__)

PREFIX_MAP = {
    "hw_cdrom_bus": "COMPUTE_STORAGE_BUS",
    "hw_disk_bus": "COMPUTE_STORAGE_BUS",
    "hw_video_model": "COMPUTE_GRAPHICS_MODEL",
    "hw_vif_model": "COMPUTE_NET_VIF_MODEL",
    "hw_architecture": "HW_ARCH",
    "hw_emulation_architecture": "COMPUTE_ARCH",
    "hw_viommu_model": "COMPUTE_VIOMMU",
}


def transform_image_metadata(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if not config.scheduler.image_metadata_prefilter:
        return spec
    props = spec.image_props
    traits = []
    for key, prefix in PREFIX_MAP.items():
        value = props.get(key)
        if value is None:
            continue
        trait = f"{prefix}_{str(value).replace('-', '_').upper()}"
        if trait not in KNOWN_TRAITS:
            # nova adds none of the traits when one is unknown.
            LOG.error("Computed trait name %r is not valid; is os-traits up to date?", trait)
            return spec
        traits.append(trait)
    return add_root_required(spec, *traits) if traits else spec
