"""One embedded AWS, one console server (and a read-only one), one Chromium per test session.

The browser is Debian's ``chromium`` (``.ci/install-browser`` installs it). Without it these tests
fail in CI (``CI`` or ``JF_REQUIRE_BROWSER`` set) and are skipped elsewhere, saying how to install it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import console_jobs
from tests.browser.harness import CHROMIUM, Server, Shop, chromium_path, serve, shop

NO_BROWSER = (
    "no Chromium at {path}: run .ci/install-browser (apt-get install -y chromium chromium-driver), "
    "or point JF_CHROMIUM at one"
)


def _require_browser() -> str:
    path = chromium_path()
    if path is None:
        why = NO_BROWSER.format(path=os.environ.get("JF_CHROMIUM") or CHROMIUM)
        if os.environ.get("CI") or os.environ.get("JF_REQUIRE_BROWSER"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    path = _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def the_shop(jf_aws: Any) -> Shop:
    return shop(jf_aws.endpoint_url)


@pytest.fixture(scope="session")
def console_url(the_shop: Shop) -> Iterator[str]:
    server: Server = serve(the_shop.console())
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def read_only_url(the_shop: Shop) -> Iterator[str]:
    server: Server = serve(the_shop.console(read_only=True))
    yield server.url
    server.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    yield tab
    context.close()


@pytest.fixture
def clean(the_shop: Shop) -> Shop:
    """The shop with empty queues and DLQs and no declined orders."""
    the_shop.empty_queues()
    console_jobs.declined.clear()
    return the_shop
