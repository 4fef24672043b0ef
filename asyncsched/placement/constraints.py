"""Flavor extra-spec / image-property readers the Placement query and pre-filters need.

Behaviour follows nova.virt.hardware's ``get_*_constraint`` helpers. The API layer has already
validated these values, so a conflict here is a malformed request: it becomes NoValidHost
with the reason instead of an exception escaping the daemon.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncsched.common.strings import bool_from_string
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Flavor, ImageMetaProps

CPU_POLICIES = ("shared", "dedicated", "mixed")
CPU_THREAD_POLICIES = ("prefer", "isolate", "require")
TPM_VERSIONS = ("1.2", "2.0")
TPM_MODELS = ("tpm-tis", "tpm-crb")
MEM_ENCRYPTION_TRAITS = {
    "amd-sev": "HW_CPU_X86_AMD_SEV",
    "amd-sev-es": "HW_CPU_X86_AMD_SEV_ES",
    "amd-sev-snp": "HW_CPU_X86_AMD_SEV_SNP",
}
EPHEMERAL_ENCRYPTION_FORMATS = ("plain", "luks", "luksv2")


def _invalid(msg: str) -> NoValidHost:
    return NoValidHost(reason=msg)


def flavor_image(
    key: str, flavor: Flavor, props: ImageMetaProps, prefix: str = "hw"
) -> tuple[str | None, str | None]:
    """The flavor ``prefix:key`` extra spec and the image ``prefix_key`` property, as text.

    Extra specs are strings; a typed image property (a boolean such as hw_mem_encryption)
    becomes its ``str``, which :func:`bool_from_string` reads back the same.
    """
    image = props.get(f"{prefix}_{key}")
    return flavor.extra_specs.get(f"{prefix}:{key}"), None if image is None else str(image)


def unique_flavor_image(
    key: str, flavor: Flavor, props: ImageMetaProps, prefix: str = "hw"
) -> str | None:
    """Like :func:`flavor_image` but both set to different values is a conflict."""
    fv, iv = flavor_image(key, flavor, props, prefix)
    if fv and iv and fv != iv:
        raise _invalid(
            f"Flavor {flavor.name} has {prefix}:{key} extra spec explicitly set to {fv}, "
            f"conflicting with image which has {prefix}_{key} explicitly set to {iv}."
        )
    return fv or iv


def cpu_policy(flavor: Flavor, props: ImageMetaProps) -> str | None:
    fp, ip = flavor_image("cpu_policy", flavor, props)
    for source, value in (("flavor extra specs", fp), ("image properties", ip)):
        if value and value not in CPU_POLICIES:
            raise _invalid(f"CPU policy {value!r} in {source} is not one of {CPU_POLICIES}")
    if fp == "dedicated":
        return "dedicated"
    if fp == "mixed":
        if ip == "dedicated":
            raise _invalid(
                "Image property 'hw_cpu_policy' is not permitted to override CPU pinning"
            )
        return "mixed"
    if fp == "shared":
        if ip in ("mixed", "dedicated"):
            raise _invalid(
                "Image property 'hw_cpu_policy' is not permitted to override CPU pinning"
            )
        return "shared"
    return ip if ip in CPU_POLICIES else None


def cpu_thread_policy(flavor: Flavor, props: ImageMetaProps) -> str | None:
    fp, ip = flavor_image("cpu_thread_policy", flavor, props)
    for value in (fp, ip):
        if value and value not in CPU_THREAD_POLICIES:
            raise _invalid(f"CPU thread policy {value!r} is not one of {CPU_THREAD_POLICIES}")
    if fp in (None, "prefer"):
        return fp or ip
    if ip and ip != fp:
        raise _invalid("Image property 'hw_cpu_thread_policy' conflicts with the flavor")
    return fp


def emulator_threads_policy(flavor: Flavor) -> str | None:
    value = flavor.extra_specs.get("hw:emulator_threads_policy")
    if not value:
        return None
    if value not in ("share", "isolate"):
        raise _invalid(f"Invalid emulator threads policy {value!r}")
    return value


def parse_cpu_spec(spec: str) -> set[int]:
    """'1-4,^3,6' -> {1, 2, 4, 6}, as nova.virt.hardware.parse_cpu_spec."""
    ids: set[int] = set()
    rejected: set[int] = set()
    try:
        for rule in spec.split(","):
            rule = rule.strip()
            if not rule:
                continue
            parts = rule.split("-", 1)
            if len(parts) > 1:
                reject = parts[0].startswith("^")
                start, end = int(parts[0].lstrip("^").strip()), int(parts[1].strip())
                if start > end:
                    raise ValueError(rule)
                (rejected if reject else ids).update(range(start, end + 1))
            elif rule.startswith("^"):
                rejected.add(int(rule[1:].strip()))
            else:
                ids.add(int(rule))
    except ValueError as exc:
        raise _invalid(f"Invalid CPU mask {spec!r}") from exc
    return ids - rejected


def _mask(mask: str, vcpus: int) -> set[int]:
    if mask.strip().startswith("^"):
        return parse_cpu_spec(f"0-{vcpus - 1},{mask}")
    return parse_cpu_spec(mask)


def dedicated_cpus(flavor: Flavor) -> set[int] | None:
    mask = flavor.extra_specs.get("hw:cpu_dedicated_mask")
    if not mask:
        return None
    pcpus = _mask(mask, flavor.vcpus)
    cpus = set(range(flavor.vcpus))
    if not pcpus or not (cpus - pcpus) or not pcpus <= cpus:
        raise _invalid("Invalid hw:cpu_dedicated_mask for a mixed instance")
    return pcpus


def realtime_cpus(flavor: Flavor, props: ImageMetaProps) -> set[int] | None:
    if not bool_from_string(flavor.extra_specs.get("hw:cpu_realtime", "")):
        return None
    fm, im = flavor_image("cpu_realtime_mask", flavor, props)
    mask = im or fm
    vcpus = set(range(flavor.vcpus))
    rt = _mask(mask, flavor.vcpus) if mask else set(vcpus)
    if not rt or (rt == vcpus and not emulator_threads_policy(flavor)) or not rt <= vcpus:
        raise _invalid("Realtime policy needs a valid hw:cpu_realtime_mask")
    return rt


def mem_encryption_trait(flavor: Flavor, props: ImageMetaProps) -> str | None:
    """The CPU trait of the requested memory-encryption model, or None if not requested."""
    fs, is_ = flavor_image("mem_encryption", flavor, props)
    fv = bool_from_string(fs) if fs is not None else None
    iv = bool_from_string(is_) if is_ is not None else None
    if not fv and not iv:
        return None
    if fv is not None and iv is not None and fv != iv:
        raise _invalid("hw:mem_encryption in the flavor conflicts with hw_mem_encryption")
    fm, im = flavor_image("mem_encryption_model", flavor, props)
    if fm and im and fm != im:
        raise _invalid("hw:mem_encryption_model conflicts with hw_mem_encryption_model")
    model = im or fm or "amd-sev"
    trait = MEM_ENCRYPTION_TRAITS.get(model)
    if trait is None:
        raise _invalid(f"Invalid memory encryption model {model!r}")
    return trait


def vpmem_labels(flavor: Flavor) -> list[str]:
    value = flavor.extra_specs.get("hw:pmem")
    if not value:
        return []
    return [label.strip() for label in value.split(",") if label.strip()]


@dataclass(frozen=True, slots=True)
class VTPMConfig:
    version: str
    model: str


def vtpm(flavor: Flavor, props: ImageMetaProps) -> VTPMConfig | None:
    version = unique_flavor_image("tpm_version", flavor, props)
    if version is None:
        return None
    if version not in TPM_VERSIONS:
        raise _invalid(f"Invalid TPM version {version!r}")
    model = unique_flavor_image("tpm_model", flavor, props) or "tpm-tis"
    if model not in TPM_MODELS:
        raise _invalid(f"Invalid TPM model {model!r}")
    if model == "tpm-crb" and version != "2.0":
        raise _invalid("TPM model CRB is only valid with TPM version 2.0.")
    return VTPMConfig(version=version, model=model)


def pci_numa_policy(flavor: Flavor, props: ImageMetaProps) -> str | None:
    fp, ip = flavor_image("pci_numa_affinity_policy", flavor, props)
    if fp and ip and fp != ip:
        raise _invalid("PCI NUMA affinity policy of the flavor conflicts with the image")
    return fp or ip


def secure_boot(flavor: Flavor, props: ImageMetaProps) -> str | None:
    policy = unique_flavor_image("secure_boot", flavor, props, prefix="os")
    if policy is not None and policy not in ("required", "disabled", "optional"):
        raise _invalid(f"Invalid secure boot policy {policy!r}")
    return policy


def maxphysaddr_mode(flavor: Flavor, props: ImageMetaProps) -> str | None:
    mode = unique_flavor_image("maxphysaddr_mode", flavor, props)
    if mode is not None and mode not in ("passthrough", "emulate"):
        raise _invalid(f"Invalid Maxphyaddr mode {mode!r}")
    return mode


def stateless_firmware(props: ImageMetaProps) -> bool:
    if props.get("hw_firmware_stateless") is None:
        return False
    if props.get("hw_firmware_type") != "uefi":
        return False
    return bool_from_string(props.get("hw_firmware_stateless", False))


def packed_virtqueue(flavor: Flavor, props: ImageMetaProps) -> bool:
    fs, is_ = flavor_image("virtio_packed_ring", flavor, props)
    fv = bool_from_string(fs) if fs is not None else None
    iv = bool_from_string(is_) if is_ is not None else None
    if fv is not None and iv is not None and fv != iv:
        raise _invalid("hw:virtio_packed_ring conflicts with hw_virtio_packed_ring")
    return bool(fv or iv)


def ephemeral_encryption(flavor: Flavor, props: ImageMetaProps) -> bool:
    fs, iv = flavor_image("ephemeral_encryption", flavor, props)
    fv = bool_from_string(fs) if fs is not None else None
    ivb = bool_from_string(iv) if iv is not None else None
    if fv is not None and ivb is not None and fv != ivb:
        raise _invalid("hw:ephemeral_encryption conflicts with hw_ephemeral_encryption")
    return bool(fv or ivb)


def ephemeral_encryption_format(flavor: Flavor, props: ImageMetaProps) -> str | None:
    fmt = unique_flavor_image("ephemeral_encryption_format", flavor, props)
    if not fmt:
        return None
    if fmt not in EPHEMERAL_ENCRYPTION_FORMATS:
        raise _invalid(f"Invalid ephemeral encryption format {fmt}")
    return fmt


def sound_model(flavor: Flavor, props: ImageMetaProps) -> str | None:
    return unique_flavor_image("sound_model", flavor, props)


def tpm_secret_security(flavor: Flavor) -> str | None:
    return flavor.extra_specs.get("hw:tpm_secret_security")
