"""accelerators_filter: a Cyborg device profile needs ``COMPUTE_ACCELERATORS`` on the host."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import add_root_required


def accelerators_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if spec.flavor.extra_specs.get("accel:device_profile"):
        return add_root_required(spec, "COMPUTE_ACCELERATORS")
    return spec
