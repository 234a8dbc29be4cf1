"""Trace context conversions and extraction from records: pure logic."""

from __future__ import annotations

from jobframework.tracing import extract, from_xray_header, new_trace, to_xray_header, valid_traceparent

XRAY = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def test_xray_header_converts_to_w3c_and_back():
    ctx = from_xray_header(XRAY)
    assert ctx is not None
    assert ctx.traceparent == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    assert to_xray_header(ctx) == XRAY


def test_extract_prefers_the_traceparent_attribute():
    parent = new_trace()
    record = {
        "messageAttributes": {"traceparent": {"stringValue": parent.traceparent, "dataType": "String"}},
        "attributes": {"AWSTraceHeader": XRAY},
    }
    got = extract(record)
    assert got.traceparent == parent.traceparent and got.xray_header == XRAY


def test_extract_falls_back_to_the_xray_header_then_a_fresh_trace():
    assert extract({"attributes": {"AWSTraceHeader": XRAY}}).trace_id == "5759e988bd862e3fe1be46a994272793"
    fresh = extract({"messageAttributes": {"traceparent": {"stringValue": "garbage"}}})
    assert valid_traceparent(fresh.traceparent)


def test_oversized_trace_attributes_are_ignored():
    huge = "00-" + "a" * 600
    assert not valid_traceparent(huge)
    record = {"messageAttributes": {"tracestate": {"stringValue": "x" * 5000}}}
    assert extract(record).tracestate is None
