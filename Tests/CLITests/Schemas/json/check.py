"""Checks lifecycle's --json outputs against cli.schema.json with the jsonschema library.

Reads a JSON list of {"command": ..., "definition": ..., "output": ...} on stdin; prints one
line per output that does not hold (the command, where, what is wrong) and exits 1 if any.
"""
import json
import pathlib
import sys

import jsonschema

schema = json.loads((pathlib.Path(__file__).parent / "cli.schema.json").read_text())
jsonschema.Draft202012Validator.check_schema(schema)
failures = 0
for case in json.load(sys.stdin):
    for part in ("snake", case["definition"]):
        validator = jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{part}"})
        for error in validator.iter_errors(case["output"]):
            failures += 1
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            print(f"{case['command']}: {part}: at {where}: {error.message[:300]}")
sys.exit(1 if failures else 0)
