"""The one name for free-form JSON: :data:`JSONValue` and :data:`JSONObject`.

Use them only at a true JSON edge, where the shape is not ours to fix: a line of a file another
tool wrote (before the schema has loaded it), a field value of a chunk's JSON form recorded as a
change (it may be any of the schema's types), a rendered report's data, an export format's
free-form metadata.  A record that crosses a stage inside letterchunk is a dataclass, a pydantic
model or a ``TypedDict`` with every key, never one of these.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JSONValue", "JSONObject"]

#: A value :func:`json.loads` can return (and :func:`json.dumps` can write).
JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"

#: A JSON object: what one line of a JSONL file holds.
JSONObject: TypeAlias = "dict[str, JSONValue]"
