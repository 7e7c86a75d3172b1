"""The API's JSON: DRF's JSONRenderer's bytes, rendered by orjson where that gives the same bytes
(docs/design.md, "Hot paths").

DRF renders with Python's `json` (compact, UTF-8, NaN refused, U+2028 and U+2029 escaped) and
its encoder for dates, UUIDs and the rest. orjson writes the same bytes for strings, integers,
booleans, null, lists and objects with string keys, and for most floats, in C. It writes some
floats differently (0.00001 where Python writes 1e-05) and accepts things Python refuses (NaN,
dataclasses, enums). So a body is handed to orjson only when every value in it is of a kind
whose bytes are known to agree (`fast_json`); any other body, and any indented one, is rendered
by DRF as before. tests/moderation/test_fast_paths.py compares the two on arbitrary data.
"""

from __future__ import annotations

import datetime
import uuid

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

# Below this magnitude orjson writes some floats without an exponent where Python uses one.
_SMALLEST_AGREEING_FLOAT = 1e-4
_LARGEST_INTEGER = 2**63 - 1
_ENCODER = JSONEncoder()
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME  # dates through DRF's encoder (its "Z")


class FastJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is not None and self.compact and self.strict and not self.ensure_ascii \
                and self.get_indent(accepted_media_type, renderer_context or {}) is None:
            body = fast_json(data)
            if body is not None:
                return body
        return super().render(data, accepted_media_type, renderer_context)


def fast_json(data) -> bytes | None:
    """`data` as DRF's compact JSONRenderer writes it, or None when orjson might write it otherwise."""
    if not _agrees(data, 0):
        return None
    try:
        body = orjson.dumps(data, default=_ENCODER.default, option=_OPTIONS)
    except orjson.JSONEncodeError:  # a lone surrogate, say: DRF's renderer gives its own answer
        return None
    return body.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")


def _agrees(value, depth: int) -> bool:
    """Whether orjson's bytes for `value` are DRF's: only kinds known to agree, nested at most
    as deep as orjson goes (it refuses deeper; DRF's renderer then answers)."""
    if depth > 200:
        return False
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is int:
        return -_LARGEST_INTEGER <= value <= _LARGEST_INTEGER
    if kind is float:
        return value == 0 or _SMALLEST_AGREEING_FLOAT <= abs(value) < float("inf")
    # Exactly these containers: Python's encoder iterates a subclass (an OrderedDict moved
    # around, a list with its own __iter__), orjson reads its storage. DRF's ReturnDict and
    # ReturnList are filled in order and never reordered.
    if kind is dict or kind is ReturnDict:
        return all(type(key) is str and _agrees(item, depth + 1) for key, item in value.items())
    if kind is list or kind is tuple or kind is ReturnList:
        return all(_agrees(item, depth + 1) for item in value)
    if isinstance(value, str):  # DRF's ErrorDetail, a TextChoices member: their text, as str
        return True
    return kind is datetime.datetime or kind is datetime.date or kind is uuid.UUID
