"""packed_virtqueue_filter: a packed virtio ring needs ``COMPUTE_NET_VIRTIO_PACKED``."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement import constraints as hw
from asyncsched.placement.prefilters.base import add_root_required


def packed_virtqueue_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if hw.packed_virtqueue(spec.flavor, spec.image_props):
        return add_root_required(spec, "COMPUTE_NET_VIRTIO_PACKED")
    return spec
