"""JSON Schema (draft 2020-12) of the wire protocol, generated from the attrs types.

    python -m dshd_protocol.schema           # rewrite the checked-in dsh-protocol.schema.json
    python -m dshd_protocol.schema --check   # exit 1 when the checked-in file is stale

The document has ``$defs`` (one per attrs type, plus ``ErrorData``), a ``methods`` map
(method -> kind, params ``$ref``, result schema) and an ``errors`` map (kind -> JSON-RPC
code). Editors check their own types against it. Optional fields are absent, never
null; every object is closed (``additionalProperties: false``) except error ``data`` and
the capabilities, which may gain fields.

One thing JSON Schema cannot say: it counts ``7.0`` as an integer; the daemon does not
(write integers without a fraction or exponent).
"""

from __future__ import annotations

import json
import sys
import types as pytypes
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import attrs

from .codec import tagged_union, wire_name
from .errors import ERROR_CODES, ERROR_DATA_FIELDS, ERROR_KINDS
from .types import EXTRA_SCHEMA_TYPES, METHODS, PROTOCOL_VERSION, Rule

SCHEMA_PATH = Path(__file__).with_name("dsh-protocol.schema.json")
REGENERATE = "./run protocol"  # the schema, then the editors' types generated from it
DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.owners: dict[str, type] = {}

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        owner = self.owners.setdefault(name, cls)
        if owner is not cls:
            raise TypeError(f"two wire types named {name}: {owner!r} and {cls!r}")
        if name not in self.defs:
            self.defs[name] = {}  # placeholder first: a type may refer to itself
            self.defs[name] = self._object(cls)
        return {"$ref": f"#/$defs/{name}"}

    def union(self, tagged: Any, by_tag: dict[str, type]) -> dict[str, Any]:
        """A tagged union as a named ``oneOf`` (each member's tag is a one-value enum)."""
        name = tagged.name
        if name not in self.defs:
            self.defs[name] = {}
            out: dict[str, Any] = {}
            if tagged.description:
                out["description"] = tagged.description
            out["oneOf"] = [self.ref(cls) for cls in by_tag.values()]
            self.defs[name] = out
        return {"$ref": f"#/$defs/{name}"}

    def _object(self, cls: type) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in attrs.fields(cls):
            name = wire_name(field.name)
            tp = field.type
            optional = field.default is not attrs.NOTHING
            if optional:
                tp = _strip_none(tp) if _is_optional(tp) else tp
                prop = self.of(tp)
                if field.default is not None:
                    prop = {**prop, "default": field.default}
            else:
                required.append(name)
                prop = self.of(tp)
            properties[name] = prop
        out: dict[str, Any] = {"type": "object"}
        doc = (cls.__doc__ or "").strip()
        if doc:
            out["description"] = " ".join(doc.split())
        out["properties"] = properties
        if required:
            out["required"] = required
        if not getattr(cls, "__dsh_open__", False):
            out["additionalProperties"] = False
        any_of = getattr(cls, "__dsh_any_of__", ())
        if any_of:
            out["anyOf"] = [{"required": [wire_name(n)]} for n in any_of]
        return out

    def of(self, tp: Any) -> dict[str, Any]:
        if tp is None or tp is type(None):
            return {"type": "null"}
        if tp is Any:
            return {}
        if tp is str:
            return {"type": "string"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        origin = get_origin(tp)
        tagged = tagged_union(tp)
        if tagged is not None:
            return self.union(*tagged)
        if origin is Annotated:
            base, *meta = get_args(tp)
            out = dict(self.of(base))
            for rule in (m for m in meta if isinstance(m, Rule)):
                if rule.minimum is not None:
                    out["minimum"] = rule.minimum
                if rule.maximum is not None:
                    out["maximum"] = rule.maximum
                if rule.pattern is not None:
                    out["pattern"] = rule.pattern
                if rule.min_items is not None:
                    out["minItems"] = rule.min_items
                if rule.unique_items:
                    out["uniqueItems"] = True
                if rule.description is not None:
                    out["description"] = rule.description
            return out
        if origin is Literal:
            values = list(get_args(tp))
            if not all(isinstance(v, str) for v in values):
                raise TypeError(f"only string literals are supported: {tp!r}")
            return {"type": "string", "enum": values}
        if origin is list:
            (item,) = get_args(tp)
            return {"type": "array", "items": self.of(item)}
        if origin is dict:
            return {"type": "object"}
        if _is_optional(tp):
            return {"anyOf": [self.of(_strip_none(tp)), {"type": "null"}]}
        if attrs.has(tp):
            return self.ref(tp)
        raise TypeError(f"no JSON Schema for {tp!r}")


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (Union, pytypes.UnionType) and type(None) in get_args(tp)


def _strip_none(tp: Any) -> Any:
    (rest,) = [a for a in get_args(tp) if a is not type(None)]
    return rest


def _error_data_schema(builder: _Builder) -> dict[str, Any]:
    variants = []
    for kind in ERROR_KINDS:
        fields = ERROR_DATA_FIELDS[kind]
        variants.append(
            {
                "type": "object",
                "properties": {"kind": {"const": kind}} | {k: builder.of(t) for k, t in fields.items()},
                "required": ["kind", *fields],
            }
        )
    return {
        "description": "JSON-RPC error data: {kind, ...}; clients ignore fields they do not know",
        "oneOf": variants,
    }


def build_schema() -> dict[str, Any]:
    builder = _Builder()
    methods: dict[str, Any] = {}
    for name, spec in METHODS.items():
        entry: dict[str, Any] = {"kind": spec.kind, "params": builder.of(spec.params)}
        if spec.kind != "notification":
            entry["result"] = builder.of(spec.result)
        methods[name] = entry
    for cls in EXTRA_SCHEMA_TYPES:
        builder.ref(cls)
    builder.defs["ErrorData"] = _error_data_schema(builder)
    return {
        "$schema": DIALECT,
        "$id": f"urn:dshd:protocol:v{PROTOCOL_VERSION}",
        "title": f"dshd wire protocol, version {PROTOCOL_VERSION}",
        "description": f"Generated from dshd_protocol.types; regenerate with `{REGENERATE}`.",
        "protocolVersion": PROTOCOL_VERSION,
        "methods": methods,
        "errors": {kind: {"code": ERROR_CODES[kind]} for kind in ERROR_KINDS},
        "$defs": dict(sorted(builder.defs.items())),
    }


def render_schema() -> str:
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


def load_schema() -> dict[str, Any]:
    """The checked-in schema document."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def write_or_check(path: Path, text: str, module: str, argv: list[str] | None) -> int:
    """A generated schema file's command: write ``text`` to ``path``, or with ``--check``
    exit 1 when the file is stale (what every generated schema here offers)."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{path} is stale; regenerate with: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    if args:
        print(f"usage: python -m {module} [--check]", file=sys.stderr)
        return 2
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return write_or_check(SCHEMA_PATH, render_schema(), "dshd_protocol.schema", argv)


if __name__ == "__main__":
    raise SystemExit(main())
