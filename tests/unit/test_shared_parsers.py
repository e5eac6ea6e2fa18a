"""The suite's parse-once helpers (tests/shared_parsers.py) are in effect.

They keep the suite within its time budget; a botocore or moto upgrade that
bypasses them would not fail a test otherwise, only slow every one.
"""

from __future__ import annotations

import boto3
import jsonpath_ng.ext


def test_new_botocore_sessions_share_one_loader() -> None:
    first = boto3.Session(region_name="eu-west-1")._session.get_component("data_loader")
    second = boto3.Session(region_name="eu-west-1")._session.get_component("data_loader")
    assert first is second


def test_a_jsonpath_is_parsed_once() -> None:
    assert jsonpath_ng.ext.parse("$.detail-type") is jsonpath_ng.ext.parse("$.detail-type")


def test_moto_converts_a_camelcase_name_once() -> None:
    import moto.core.utils
    import moto.sqs.models

    for module in (moto.core.utils, moto.sqs.models):
        assert hasattr(module.camelcase_to_underscores, "cache_info"), module.__name__
    assert moto.core.utils.camelcase_to_underscores("VisibilityTimeout") == "visibility_timeout"
