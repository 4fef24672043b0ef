"""Image metadata: ImageMeta/ImageMetaProps primitives and the glance-style legacy dict.

Which names are fields, which are legacy spellings and which type each field has is
:mod:`asyncsched.objects.image_props`'s business; this module only reads values strictly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asyncsched.objects import image_props as rules
from asyncsched.objects.codec.primitives import (
    NAME,
    as_dict,
    field,
    opt_bool,
    opt_int,
    opt_str,
    str_set,
    unwrap,
)
from asyncsched.objects.models import ImageMeta, ImageMetaProps

Reader = Callable[[Any, str], Any]

#: The ImageMetaProps fields our model types (the rest stay raw in ``other``).
TYPED_PROPS = tuple(n for n in ImageMetaProps.__dataclass_fields__ if n != "other")


def prop_reader(name: str) -> Reader:
    """The strict reader for a typed ImageMetaProps field, by nova's type for it."""
    kind = rules.field_kind(name)
    if kind == "bool":
        return opt_bool
    if kind == "int":
        return opt_int
    return opt_str


def decode_image_props(value: Any, path: str = "image.properties") -> ImageMetaProps:
    d = unwrap(value, path, "ImageMetaProps")
    return image_props_from_fields(d, path)


def image_props_from_fields(d: Mapping[str, Any], path: str) -> ImageMetaProps:
    """Field name -> value (nova's names already) -> :class:`ImageMetaProps`."""
    kwargs: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for key, val in d.items():
        if key == "traits_required":
            kwargs[key] = str_set(val, f"{path}.{key}")
        elif key in TYPED_PROPS:
            kwargs[key] = prop_reader(key)(val, f"{path}.{key}")
        elif val is not None:
            other[key] = val
    return ImageMetaProps(**kwargs, other=other)


def _image(d: Mapping[str, Any], path: str, properties: ImageMetaProps) -> ImageMeta:
    return ImageMeta(
        id=field(d, "id", path, opt_str, None),
        name=field(d, "name", path, opt_str, None),
        status=field(d, "status", path, opt_str, None),
        disk_format=field(d, "disk_format", path, opt_str, None),
        container_format=field(d, "container_format", path, opt_str, None),
        owner=field(d, "owner", path, opt_str, None),
        size=field(d, "size", path, opt_int, None),
        min_ram=field(d, "min_ram", path, opt_int, None),
        min_disk=field(d, "min_disk", path, opt_int, None),
        properties=properties,
    )


def decode_image(value: Any, path: str = "image") -> ImageMeta:
    d = unwrap(value, path, "ImageMeta")
    props = d.get("properties")
    return _image(
        d,
        path,
        ImageMetaProps() if props is None else decode_image_props(props, f"{path}.properties"),
    )


def glance_props_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Glance's property dict -> nova's field names, by ``ImageMetaProps.from_dict``'s rules:
    legacy names first, current names override them, ``trait:X=required`` becomes a trait.
    Names nova does not know stay (newer fields); the legacy spellings do not."""
    fields = rules.from_legacy_names(raw)
    traits: list[str] = []
    for key, val in raw.items():
        if key.startswith(rules.TRAIT_PREFIX):
            if rules.is_required_trait(key, val):
                traits.append(key[len(rules.TRAIT_PREFIX) :])
        elif key not in rules.LEGACY_IMAGE_PROPS and key != rules.VMWARE_ADAPTER_TYPE:
            fields[key] = val
    if traits:
        fields["traits_required"] = sorted(traits)
    return fields


def decode_glance_image(value: Any, path: str) -> ImageMeta | None:
    """A legacy (pre-4.3) glance-style image dict, or an ImageMeta primitive."""
    if value is None:
        return None
    d = as_dict(value, path)
    if NAME in d:
        return decode_image(d, path)
    raw_props = as_dict(d.get("properties") or {}, f"{path}.properties")
    fields = glance_props_fields(raw_props)
    image_fields = {k: v for k, v in d.items() if k != "properties"}
    return _image(image_fields, path, image_props_from_fields(fields, f"{path}.properties"))
