"""Text about an exception that never raises, whatever the exception does.

A job may raise anything: an exception whose ``__str__`` or ``__repr__`` raises, returns a non-string,
or recurses. The failure path must still classify, retry or dead-letter it, so everything the consumer
says about an exception goes through :func:`describe`.

Example:
    >>> class Weird(Exception):
    ...     def __str__(self) -> str:
    ...         raise RuntimeError("no text for you")
    >>> describe(Weird())
    'Weird: <str() of Weird raised RuntimeError>'
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

MAX_ERROR_CHARS = 1000
"""The longest error text kept (the ``jf-error`` attribute, the status record)."""


def _type_name(value: object) -> str:
    try:
        name = type(value).__name__
        return name if isinstance(name, str) else "exception"
    except BaseException:
        return "exception"


def safe_str(value: object) -> str:
    """``str(value)``; a stand-in text when ``__str__`` raises or gives something that is not a ``str``."""
    try:
        text: object = value.__str__()  # str() itself refuses a __str__ that returns a non-str
        if isinstance(text, str):
            return text
    except Exception as exc:
        return f"<str() of {_type_name(value)} raised {_type_name(exc)}>"
    except BaseException as exc:  # e.g. a __str__ that raises KeyboardInterrupt: still text, never fatal
        return f"<str() of {_type_name(value)} raised {_type_name(exc)}>"
    return f"<str() of {_type_name(value)} is not text>"


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters (a 5,000-character argument is
    not echoed in full).

    >>> shown("x" * 5000)
    "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (5,000 characters)"
    """
    text = repr(value)
    size = len(value) if isinstance(value, str) else len(text)  # (a text's own, not its repr's quotes)
    return text if len(text) <= limit else f"{text[: limit - 3]}... ({size:,} characters)"


def describe(exc: BaseException, limit: int = MAX_ERROR_CHARS) -> str:
    """``"TypeName: message"``, at most ``limit`` characters; never raises.

    A pydantic ``ValidationError`` is one line, ``field: message; other: message`` (its own text is
    several lines, with a link per field).

    Example:
        >>> from pydantic import BaseModel, ValidationError
        >>> class Hello(BaseModel):
        ...     name: str
        ...     age: bool
        >>> try:
        ...     Hello.model_validate({"age": "maybe"})
        ... except ValidationError as exc:
        ...     print(describe(exc))
        ValidationError: name: Field required; age: Input should be a valid boolean, unable to interpret input
        >>> from jobframework.errors import RetryableError
        >>> try:
        ...     try:
        ...         raise TimeoutError("crm did not answer")
        ...     except TimeoutError as exc:
        ...         raise RetryableError("retrying crm", delay=60) from exc
        ... except RetryableError as exc:
        ...     print(describe(exc))
        RetryableError: retrying crm (from TimeoutError: crm did not answer)
        >>> try:  # (a message that says its cause already: once)
        ...     try:
        ...         raise TimeoutError("crm did not answer")
        ...     except TimeoutError as exc:
        ...         raise RetryableError(f"crm: {exc}") from exc
        ... except RetryableError as exc:
        ...     print(describe(exc))
        RetryableError: crm: crm did not answer
    """
    message = _validation_text(exc)
    if message is None:
        message = safe_str(exc)
    text = f"{_type_name(exc)}: {message}" if message else _type_name(exc)
    cause = exc.__cause__
    if cause is not None and _says_what_to_do(exc):  # (raise RetryableError(...) from exc: Celery's exc=)
        said = safe_str(cause)
        if said not in message:  # (a message that says its cause already: no second time)
            text += f" (from {_type_name(cause)}: {said})"
    return text[:limit]


def _says_what_to_do(exc: BaseException) -> bool:
    """Whether ``exc`` is one a job raises to say what to do with a failure (retry it, or not), often
    over the error that caused it, which its dead letter would otherwise lose."""
    from jobframework.errors import PermanentError, RetryableError

    return isinstance(exc, RetryableError | PermanentError)


def _validation_text(exc: BaseException) -> str | None:
    """A pydantic ``ValidationError``'s problems as one line (``None`` for any other exception)."""
    if "pydantic_core" not in sys.modules:  # not loaded: this cannot be one
        return None
    try:
        from pydantic import ValidationError

        from jobframework.validation import validation_problems

        return validation_problems(exc) if isinstance(exc, ValidationError) else None
    except Exception:
        return None


def closest(name: str, names: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The one of ``names`` that ``name`` is a likely misspelling of (for "did you mean ...?"), if any.

    Example:
        >>> closest("deafult", ["critical", "high", "default", "low"]), closest("x", ["high"])
        ('default', None)
    """
    import difflib

    found = difflib.get_close_matches(name, list(names), n=1, cutoff=cutoff)
    return found[0] if found else None
