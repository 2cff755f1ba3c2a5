"""Schemathesis against the app (real store and loop, in-process executor): requests generated from
the OpenAPI document itself, valid and invalid, get no 5xx, and every answer (a 4xx included)
matches the schema the document declares for it. Bounded: a fixed number of examples per route,
derandomized, so `make test` runs the same cases in well under a minute."""

from __future__ import annotations

import resource

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="the fuzz test needs the dev extra (schemathesis)")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,  # noqa: E402
                                               status_code_conformance)

from tests.unit.control.conftest import build_client  # noqa: E402

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = {GenerationMode.POSITIVE: 40, GenerationMode.NEGATIVE: 25}
LOOPBACK = {"Host": "127.0.0.1"}  # a server without tokens answers only requests addressed to loopback


def test_openapi_declares_one_error_shape(tmp_path):
    doc = build_client(tmp_path).get("/openapi.json").json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    error = doc["components"]["schemas"]["ErrorOut"]
    assert error["properties"]["detail"]["type"] == "string" and error["properties"]["errors"]["type"] == "array"
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            if op.get("parameters") or op.get("requestBody"):
                assert op["responses"]["422"]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/ErrorOut"}, (method, path)
            if op.get("requestBody"):
                assert "413" in op["responses"], (method, path)


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def test_generated_requests_get_no_5xx_and_answers_match_the_schema(tmp_path):
    client = build_client(tmp_path)
    client.get("/healthz")
    before = _peak_rss_bytes()
    app = client.app
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=LOOPBACK)
    ran = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode, count in EXAMPLES.items():
            @settings(max_examples=count, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case):
                response = case.call(headers=LOOPBACK)
                case.validate_response(response, checks=CHECKS)
            try:
                run()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # only free-text path parameters: nothing is invalid
                continue
            ran += 1
    assert ran >= 11 + 3  # every route with valid inputs; the body and the query parameters with invalid ones
    assert client.get("/healthz").json()["ok"]
    # The server's memory stays bounded: what every request may read or store is capped (the peak
    # of this whole test process, which also holds the fuzzer, grows by far less than 1 GiB).
    assert _peak_rss_bytes() - before < 1 << 30
