"""A producer that knows a job only from the catalog refuses a URL the job's model would refuse."""

from __future__ import annotations

import pytest
from pydantic import AnyUrl, BaseModel, HttpUrl, ValidationError

from jobframework.catalog import RoutedJob
from jobframework.errors import PayloadValidationError
from jobframework.jobs import JobRegistry, job
from tests.unit.catalog_routes import as_routed


class Hook(BaseModel):
    url: HttpUrl
    callback: AnyUrl | None = None


registry = JobRegistry()


@job("webhooks.deliver", registry=registry)
def deliver(hook: Hook) -> None:
    """Posts to the hook."""


def routed() -> RoutedJob:
    return as_routed(deliver)


def test_an_http_url_field_refuses_another_scheme_before_sending_saying_which_it_takes():
    """``format: uri`` alone passed ``ftp://``, which the consumer's model then refused: the job was
    dead-lettered invalid-payload instead of the enqueue failing."""
    with pytest.raises(PayloadValidationError, match=r"url: must be a URL whose scheme is http or https$"):
        routed().validate({"url": "ftp://files.example.com/report"})
    with pytest.raises(ValidationError, match="URL scheme should be"):  # what the consumer says
        Hook.model_validate({"url": "ftp://files.example.com/report"})


@pytest.mark.parametrize("url", ["https://example.com/hook", "HTTP://example.com/hook"])
def test_an_http_url_the_model_takes_passes_in_any_case(url):
    assert routed().validate({"url": url})["url"] == url
    Hook.model_validate({"url": url})


def test_a_url_type_of_any_scheme_is_not_narrowed():
    assert routed().validate({"url": "https://a.example", "callback": "mailto:ops@example.com"})
