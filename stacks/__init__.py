"""This repository's own deployment (not installed): :func:`stacks.application.build_app` composes the
library's :class:`~jobframework.cdk.JobFrameworkStack` over the example jobs in ``handlers/``, as a
team's app does over its own jobs. ``app.py`` at the repository root calls it."""
