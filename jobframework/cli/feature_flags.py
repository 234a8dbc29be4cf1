"""The CDK feature flags that ``jf new`` writes into the new project's ``cdk.json`` context.

Without them every ``cdk synth`` lists each flag left unset (about 85 with aws-cdk-lib 2.275), as a
project made by ``cdk init`` would not: ``cdk init`` writes aws-cdk-lib's recommended flags, which the
library ships as ``recommended-feature-flags.json`` in its jsii assembly
(``aws_cdk/_jsii/aws-cdk-lib@<version>.jsii.tgz``). :func:`recommended_feature_flags` reads them from
the aws-cdk-lib installed beside this jf, without importing it (which would start Node.js), else
from the copy made from aws-cdk-lib 2.275.0 (``cdk_feature_flags.json``, next to this module).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import tarfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MEMBER = "package/recommended-feature-flags.json"
"""Where the flags are inside aws-cdk-lib's jsii tarball."""
FALLBACK = Path(__file__).with_name("cdk_feature_flags.json")
"""The flags of aws-cdk-lib 2.275.0, for a jf installed without aws-cdk-lib (the ``cdk`` extra)."""


def recommended_feature_flags() -> tuple[dict[str, Any], str]:
    """aws-cdk-lib's recommended feature flags and where they came from (``aws-cdk-lib 2.275.0`` for
    the installed one, ``jobframework's copy (aws-cdk-lib 2.275.0)`` for the fallback).

    Example:
        >>> flags, source = recommended_feature_flags()
        >>> flags["@aws-cdk/core:checkSecretUsage"], "aws-cdk-lib" in source
        (True, True)
    """
    tarball = _installed_assembly()
    if tarball is not None:
        try:
            flags = _read_member(tarball)
        except (OSError, tarfile.TarError, ValueError) as exc:  # a broken install: the copy will do
            log.warning(
                "reading the feature flags of %s failed (%s); using jobframework's copy", tarball, exc
            )
        else:
            if flags is not None:
                return flags, tarball.name.removesuffix(".jsii.tgz").replace("@", " ")
    return json.loads(FALLBACK.read_text(encoding="utf-8")), "jobframework's copy (aws-cdk-lib 2.275.0)"


def _installed_assembly() -> Path | None:
    """aws-cdk-lib's jsii tarball, found without importing ``aws_cdk`` (``None``: not installed)."""
    try:
        spec = importlib.util.find_spec("aws_cdk")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location, "_jsii").glob("aws-cdk-lib@*.jsii.tgz"))
        if found:
            return found[-1]
    return None


def _read_member(tarball: Path) -> dict[str, Any] | None:
    """The flags in ``tarball`` (read as a stream up to their file: under a second), or ``None``."""
    with tarfile.open(tarball, mode="r|gz") as archive:
        for member in archive:
            if member.name == MEMBER:
                data = archive.extractfile(member)
                if data is None:
                    return None
                flags = json.loads(data.read())
                if not isinstance(flags, dict):
                    raise ValueError(f"{MEMBER} is not a JSON object")
                return flags
    return None


def context_json(flags: dict[str, Any], indent: int = 2) -> str:
    """``flags`` as the value of ``cdk.json``'s ``"context"`` key, nested ``indent`` spaces deep.

    Example:
        >>> print(context_json({"@aws-cdk/core:checkSecretUsage": True}))
        {
            "@aws-cdk/core:checkSecretUsage": true
          }
    """
    return json.dumps(flags, indent=2).replace("\n", "\n" + " " * indent)
