"""moto's response serializer asks six alias providers, for every member of every structure it writes, where its value is.

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster (a DynamoDB AttributeValue
has ten members, so an item of ten attributes asks ~100 times; a GetItem spent four fifths of moto's time there;
bench/README.md, "The local stand-in's patches"). The answer depends only on the object's class, the shape and the
member's name, all fixed while the process runs: it is worked out once for each. tests/integration/test_local_aws.py
(plain JSON answers compared with moto's serializer) fails if moto's serializer changes under it.
"""

from __future__ import annotations

from typing import Any

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto.core.serialize import AttributePicker, XFormedAttributePicker

    for picker in (AttributePicker, XFormedAttributePicker):
        original = picker.get_possible_keys
        known: dict[tuple[Any, ...], tuple[Any, tuple[str, ...]]] = {}

        def get_possible_keys(self: Any, context: Any, original: Any = original, known: dict[Any, Any] = known) -> Any:
            obj, shape = context.obj, context.shape
            if "Meta" in getattr(obj, "__dict__", ()):  # aliases of its own: not the class's
                return original(self, context)
            # moto sets a member's shape's `parent` as it writes the structure: part of the question too
            shapes = (shape, getattr(shape, "parent", None))
            key = (type(self), tuple(self.alias_providers), type(obj), *map(id, shapes), context.key)
            hit = known.get(key)
            # the shapes are kept with their answer, so their ids are not reused while it is
            if hit is None or any(a is not b for a, b in zip(hit[0], shapes, strict=True)):
                hit = known[key] = (shapes, tuple(original(self, context)))
            return hit[1]

        replace(__name__, picker, "get_possible_keys", get_possible_keys)
