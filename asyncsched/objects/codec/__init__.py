"""The one place that reads and writes nova versioned-object primitives.

Decoding is lenient the way a newer-or-older nova peer needs: unknown fields are ignored, any
minor version of a known major is accepted, unset fields get nova's defaults, and plain dicts
(no ``nova_object.*`` wrapper) are read as the object's data. It is strict about what would
make a decision wrong: a wrong type, an unknown object name or a different major version raises
:class:`CodecError` with the path of the offending value, so the RPC layer can answer with a
clear failure instead of scheduling on garbage.

Encoding writes what nova itself writes (Selection 1.1, SchedulerLimits 1.0, ...), so an
unmodified conductor rebuilds its own objects from our replies.

The package is split by object family: ``primitives`` (wrapper, scalar coercion), ``image``,
``request_spec``, ``limits``, ``selection``, ``legacy`` (pre-4.3 dicts), ``casts`` (aggregates,
instance lists) and ``context``. This module exports what callers use.
"""

from asyncsched.objects.codec.casts import (
    decode_aggregate,
    decode_aggregates,
    decode_instance_uuids,
)
from asyncsched.objects.codec.context import decode_context
from asyncsched.objects.codec.image import decode_image, decode_image_props
from asyncsched.objects.codec.legacy import request_spec_from_legacy
from asyncsched.objects.codec.limits import (
    decode_limits,
    decode_network_metadata,
    encode_limits,
    encode_network_metadata,
    limits_to_dict,
)
from asyncsched.objects.codec.primitives import MAX_DEPTH, OBJECT_VERSIONS, CodecError, unwrap, wrap
from asyncsched.objects.codec.request_spec import decode_flavor, decode_request_spec
from asyncsched.objects.codec.selection import (
    decode_selection,
    encode_selection,
    encode_selections,
    selection_to_dict,
)

__all__ = [
    "MAX_DEPTH",
    "OBJECT_VERSIONS",
    "CodecError",
    "decode_aggregate",
    "decode_aggregates",
    "decode_context",
    "decode_flavor",
    "decode_image",
    "decode_image_props",
    "decode_instance_uuids",
    "decode_limits",
    "decode_network_metadata",
    "decode_request_spec",
    "decode_selection",
    "encode_limits",
    "encode_network_metadata",
    "encode_selection",
    "encode_selections",
    "limits_to_dict",
    "request_spec_from_legacy",
    "selection_to_dict",
    "unwrap",
    "wrap",
]
