"""contracts/: the checked-in JSON Schemas match the models, and every example validates."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest

from integrator.documents import schemas
from integrator.documents.policy import parse_policy

ROOT = Path(__file__).resolve().parents[2]
CONTRACTS = ROOT / "contracts"
EXAMPLES = CONTRACTS / "examples"

# example file stem prefix → schema stem
EXAMPLE_SCHEMAS = {
    "ownership-contract": "ownership-contract.v1",
    "verdict": "verdict.v1",
    "expansion-request": "expansion-request.v1",
    "submission": "submission.v1",
    "policy": "policy.v1",
}


@pytest.mark.parametrize("stem", sorted(schemas.MODELS))
def test_checked_in_schema_matches_model(stem: str) -> None:
    """Each contracts/<name>.schema.json equals what the model generates today."""
    path = CONTRACTS / f"{stem}.schema.json"
    assert path.exists(), f"{path} is missing: run `integrator schema export contracts/`"
    assert path.read_text("utf-8") == schemas.render(stem), (
        f"{path.name} drifted from its model: run `integrator schema export contracts/`"
    )


def _schema_for(example: Path) -> str:
    for prefix, stem in EXAMPLE_SCHEMAS.items():
        if example.name.startswith(prefix):
            return stem
    raise AssertionError(f"no schema known for example {example.name}")


EXAMPLE_FILES = sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".json", ".toml"))


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_validates(example: Path) -> None:
    """Every example document validates against its JSON Schema and its model."""
    stem = _schema_for(example)
    schema = json.loads((CONTRACTS / f"{stem}.schema.json").read_text("utf-8"))
    if example.suffix == ".toml":
        text = example.read_text("utf-8")
        document = tomllib.loads(text)
        parse_policy(text)
    else:
        document = json.loads(example.read_text("utf-8"))
        schemas.load_model(schemas.MODELS[stem]).model_validate_json(example.read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(document)


def test_every_model_has_an_example() -> None:
    """Each schema with a JSON/TOML form has at least one example document."""
    covered = {_schema_for(p) for p in EXAMPLE_FILES}
    assert covered >= set(EXAMPLE_SCHEMAS.values())


@pytest.mark.parametrize("field", ["contractDigest", "treeDigest", "diffDigest"])
def test_expansion_request_schema_pins_digest_format(field: str) -> None:
    """The expansion-request schema refuses a digest that is not sha256:<64 lowercase hex>."""
    schema = json.loads((CONTRACTS / "expansion-request.v1.schema.json").read_text("utf-8"))
    document = json.loads((EXAMPLES / "expansion-request.json").read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(document)
    document[field] = "sha256:00"
    assert [e.json_path for e in validator.iter_errors(document)] == [f"$.{field}"]
