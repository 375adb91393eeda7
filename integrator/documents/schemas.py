"""JSON Schemas for every document other programs exchange with integrator.

The schemas in `contracts/` are generated from the pydantic models by
`integrator schema export contracts/`; a test fails when they drift.
Models are named by import path so a module is imported only when its schema is needed.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pydantic is loaded with the first model, not to build `schema --help`
    from pydantic import BaseModel

# file stem → "module:Model"
MODELS: dict[str, str] = {
    "ownership-contract.v1": "integrator.documents.contract:OwnershipContract",
    "verdict.v1": "integrator.documents.verdict:Verdict",
    "policy.v1": "integrator.documents.policy:Policy",
    "expansion-request.v1": "integrator.documents.expansion:ExpansionRequest",
    "submission.v1": "integrator.documents.submission:Submission",
    "task.v1": "integrator.fleet.tasks:TaskFrontMatter",
}

TITLES: dict[str, str] = {
    "ownership-contract.v1": "coding.workspace.ownership.v1",
    "verdict.v1": "integrator.verdict.v1",
    "policy.v1": "integrator.policy.v1 (TOML)",
    "expansion-request.v1": "integrator.expansion.v1",
    "submission.v1": "integrator.submission.v1",
    "task.v1": "integrator task file front matter",
}


def load_model(spec: str) -> type[BaseModel]:
    from pydantic import BaseModel

    module_name, _, attr = spec.partition(":")
    model = getattr(importlib.import_module(module_name), attr)
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


def schema_for(stem: str) -> dict[str, Any]:
    model = load_model(MODELS[stem])
    schema = model.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://integrator.invalid/contracts/{stem}.schema.json"
    schema["title"] = TITLES[stem]
    return schema


def render(stem: str) -> str:
    return json.dumps(schema_for(stem), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem in MODELS:
        path = folder / f"{stem}.schema.json"
        path.write_text(render(stem), encoding="utf-8")
        written.append(path)
    return written
