"""tpm_secret_security_filter: a vTPM needs the host to support the requested secret security."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement import constraints as hw
from asyncsched.placement.prefilters.base import RequestFilterFailed, add_root_required

LOG = logging.getLogger(__name__)

TRAITS = {
    "user": "COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER",
    "host": "COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST",
    "deployment": "COMPUTE_SECURITY_TPM_SECRET_SECURITY_DEPLOYMENT",
}


def tpm_secret_security_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if hw.vtpm(spec.flavor, spec.image_props) is None:
        return spec
    security = hw.tpm_secret_security(spec.flavor) or "user"
    trait = TRAITS.get(security)
    if trait is None:
        msg = f"TPM secret security '{security}' is not supported."
        LOG.warning(msg)
        raise RequestFilterFailed(msg)
    return add_root_required(spec, trait)
