"""Lambda entry points shipped with jobframework: the worker (SQS consumer) and the HTTP API."""
