"""Write the published JSON Schemas into mcs_host/schemas/, or check they are current.

The MCS contract's types, the registry file, the signed release statement, and the
document each command prints with --json (cli-COMMAND.schema.json).

python scripts/gen_schemas.py          # rewrite the files
python scripts/gen_schemas.py --check  # exit 1 if a file differs from the models
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import BaseModel, TypeAdapter

from mcs_host.cli.documents import DOCUMENTS, schema_urn
from mcs_host.contract import contract_schemas
from mcs_host.trust.registry import Registry
from mcs_host.trust.release import ReleaseStatement

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "mcs_host" / "schemas"


def published_schemas() -> dict[str, dict[str, object]]:
    """Every published schema by file name."""
    schemas: dict[str, dict[str, object]] = dict(contract_schemas())
    others: tuple[tuple[type[BaseModel], str], ...] = (
        (Registry, "urn:mcs-host:registry:1"),
        (ReleaseStatement, "urn:mcs-host:release-statement:1"),
    )
    for model, urn in others:
        schemas[f"{model.__name__}.schema.json"] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": urn,
            **model.model_json_schema(),
        }
    for command, document in DOCUMENTS.items():
        schema = TypeAdapter(document).json_schema()
        _closed(schema)
        schema["properties"]["schema"]["const"] = schema_urn(command)
        schemas[f"cli-{command}.schema.json"] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": schema_urn(command),
            "description": f"What `mcs-host {command} --json` prints.",
            **schema,
        }
    return schemas


def _closed(schema: object) -> None:
    """Forbid keys a document does not declare, in every object of ``schema``: a consumer
    learns of a new key from a new schema, not from a surprise."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
        for value in schema.values():
            _closed(value)
    elif isinstance(schema, list):
        for value in schema:
            _closed(value)


def render(schema: dict[str, object]) -> str:
    """The committed text of one schema: sorted keys, two-space indent, final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def stale(directory: Path = SCHEMA_DIR) -> list[str]:
    """File names under ``directory`` that are missing, differ, or are not generated."""
    expected = {name: render(schema) for name, schema in published_schemas().items()}
    present = {p.name for p in directory.glob("*.schema.json")}
    wrong = [
        name
        for name, text in expected.items()
        if not (directory / name).is_file() or (directory / name).read_text("utf-8") != text
    ]
    return sorted(set(wrong) | (present - set(expected)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args()
    out_of_date = stale()
    if args.check:
        for name in out_of_date:
            print(f"{SCHEMA_DIR / name}: out of date; run python scripts/gen_schemas.py")
        return 1 if out_of_date else 0
    SCHEMA_DIR.mkdir(exist_ok=True)
    for name, schema in published_schemas().items():
        (SCHEMA_DIR / name).write_text(render(schema), "utf-8")
    for name in out_of_date:
        path = SCHEMA_DIR / name
        if name not in published_schemas():
            path.unlink()
        print(f"wrote {path}" if path.exists() else f"removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
