"""Schemathesis over every operation of /api/openapi.json (as an admin, so protected ones are reached too):
no 5xx, and every response conforms to the description. Bounded and derandomised so CI stays fast."""

from __future__ import annotations

from collections import Counter
from typing import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from service.config import Settings
from service.web.openapi import build_spec

from .conftest import bearer_environ

EXAMPLES_PER_OPERATION = 8
# schemathesis' defaults for refusing invalid data, plus 413: an oversized invalid body is refused by its size
# (never 5xx, which stays a failure through the not_a_server_error check).
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CONFIG = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}}})
# Operations with a rule between fields that a schema cannot state: a schema-valid body may still get its 400.
CROSS_FIELD_RULES = {"POST /api/customers/erase": "confirm must repeat email (the address typed twice)"}
ACCEPTED = ["200", "201", "202", "204", "301", "302", "303", "401", "403", "404", "409", "429"]
CROSS_FIELD_CONFIG = SchemathesisConfig.from_dict({"checks": {
    "negative_data_rejection": {"expected-statuses": REFUSALS},
    "positive_data_acceptance": {"expected-statuses": [*ACCEPTED, "400"]}}})
STATUSES: Counter[int] = Counter()


@pytest.fixture(scope="module", autouse=True)
def fuzz_summary() -> Iterator[None]:
    """Print how many cases ran and how many were 5xx (run with -s to see it; the README quotes it)."""
    yield
    errors = sum(count for status, count in STATUSES.items() if status >= 500)
    print(f"\nfuzz: {sum(STATUSES.values())} cases, {errors} 5xx, statuses {dict(sorted(STATUSES.items()))}")


@pytest.fixture
def admin_headers(runtime) -> dict[str, str]:
    """An admin bearer token (admins are not rate limited, so the fuzzer is never throttled)."""
    return {"Authorization": bearer_environ(runtime, "fuzz")["HTTP_AUTHORIZATION"]}


# schemathesis' own pytest plugin (schema.parametrize) does not run under pytest 9, so each operation is a
# parametrised test that draws its cases from schemathesis' strategy with Hypothesis directly.
SPEC = build_spec(Settings())
CASES = [(f"{method.upper()} {path}", mode) for path, ops in SPEC["paths"].items() for method, op in ops.items()
         for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if mode is GenerationMode.POSITIVE or op["parameters"] or "requestBody" in op]  # else nothing is invalid


@pytest.mark.parametrize("label, mode", CASES, ids=[f"{label}-{mode.value}" for label, mode in CASES])
def test_no_operation_answers_5xx_or_outside_its_description(seeded, app, admin_headers, label, mode):
    """Valid cases must be accepted (2xx or 404 for ids that do not exist); invalid ones must get a 4xx."""
    config = CROSS_FIELD_CONFIG if label in CROSS_FIELD_RULES else CONFIG
    operation = schemathesis.openapi.from_wsgi("/api/openapi.json", app, config=config).find_operation_by_label(label)
    assert operation is not None, label

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case) -> None:
        response = case.call(headers=admin_headers)
        STATUSES[response.status_code] += 1
        case.validate_response(response, headers=admin_headers)

    check()
