"""virtio_sound_filter: a virtio sound device needs ``COMPUTE_SOUND_MODEL_VIRTIO``."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement import constraints as hw
from asyncsched.placement.prefilters.base import add_root_required


def virtio_sound_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if hw.sound_model(spec.flavor, spec.image_props) == "virtio":
        return add_root_required(spec, "COMPUTE_SOUND_MODEL_VIRTIO")
    return spec
