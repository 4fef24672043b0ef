"""ephemeral_encryption_filter: encrypted ephemeral disks need the host's encryption traits."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement import constraints as hw
from asyncsched.placement.prefilters.base import add_root_required


def ephemeral_encryption_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    flavor, props = spec.flavor, spec.image_props
    if not hw.ephemeral_encryption(flavor, props):
        return spec
    traits = ["COMPUTE_EPHEMERAL_ENCRYPTION"]
    fmt = hw.ephemeral_encryption_format(flavor, props)
    if fmt:
        traits.append(f"COMPUTE_EPHEMERAL_ENCRYPTION_{fmt.upper()}")
    return add_root_required(spec, *traits)
