"""EventBridge Scheduler expressions, checked as Scheduler checks them, before anything is deployed.

:func:`check_expression` accepts exactly the three forms Scheduler takes:

- ``rate(value unit)``: ``value`` a whole number >= 1; ``unit`` one of ``minute``, ``hour``,
  ``day`` for 1 and ``minutes``, ``hours``, ``days`` otherwise (``rate(1 minute)``,
  ``rate(5 minutes)``).
- ``cron(minutes hours day-of-month month day-of-week year)``: six fields; exactly one of
  day-of-month and day-of-week is ``?``; minutes 0-59, hours 0-23, day-of-month 1-31 (with ``L``
  and ``nW``), month 1-12 or ``JAN``-``DEC``, day-of-week 1-7 or ``SUN``-``SAT`` (with ``L``, ``nL``
  and ``n#k``), year 1970-2199; each field takes ``*``, lists (``,``), ranges (``-``) and
  increments (``/``).
- ``at(yyyy-mm-ddThh:mm:ss)``: one time (delayed enqueues use it; a recurring ``@job`` schedule
  does not).

Every error is one line that names the expression, what is wrong and what to write.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime

from jobframework.errors import ConfigurationError

_RATE = re.compile(r"^rate\((?P<value>[^\s)]+)\s+(?P<unit>[^\s)]+)\)$")
_CRON = re.compile(r"^cron\((?P<body>[^)]*)\)$")
_AT = re.compile(r"^at\((?P<when>[^)]*)\)$")
_RATE_UNITS = ("minute", "hour", "day")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_FORMS = "use 'rate(5 minutes)', 'cron(0 3 * * ? *)' (six fields) or 'at(2027-01-31T09:00:00)'"
_RECURRING_FORMS = "use 'rate(5 minutes)' or 'cron(0 3 * * ? *)' (six fields: a year last, ? in a day field)"


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Names standing for ``low``, ``low + 1``, ... (months, days of the week)."""


_FIELDS = (
    _Field("minutes", 0, 59),
    _Field("hours", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 1, 7, _DAYS),
    _Field("year", 1970, 2199),
)


def check_expression(expression: str, *, recurring: bool = False) -> str:
    """The expression, stripped, if EventBridge Scheduler accepts it; else a one-line error (naming
    only the recurring forms when ``recurring``: a job's schedule).

    Example:
        >>> check_expression("rate(1 hour)")
        'rate(1 hour)'
        >>> check_expression(" cron(0 3 ? * MON-FRI *) ")
        'cron(0 3 ? * MON-FRI *)'

    Raises:
        ConfigurationError: not one of the forms, or a value outside what Scheduler takes.
    """
    forms = _RECURRING_FORMS if recurring else _FORMS
    if not isinstance(expression, str):
        raise ConfigurationError(f"a schedule expression is a str, got {expression!r}; {forms}")
    text = expression.strip()
    if text.startswith("rate("):
        _check_rate(text)
    elif text.startswith("cron("):
        _check_cron(text)
    elif text.startswith("at("):
        _check_at(text)
    else:
        raise ConfigurationError(
            f"schedule {expression!r} is not an EventBridge Scheduler expression; {forms}"
            + _unix_cron_hint(text)
        )
    return text


_MACROS = {
    "@hourly": "cron(0 * * * ? *)",
    "@daily": "cron(0 0 * * ? *)",
    "@midnight": "cron(0 0 * * ? *)",
    "@weekly": "cron(0 0 ? * SUN *)",
    "@monthly": "cron(0 0 1 * ? *)",
    "@yearly": "cron(0 0 1 1 ? *)",
    "@annually": "cron(0 0 1 1 ? *)",
}
"""A crontab's macros, as EventBridge Scheduler writes them."""


def _unix_cron_hint(text: str) -> str:
    """For a Unix crontab line (Celery beat's ``crontab``, cron's: five fields, bare or in ``cron()``,
    or a macro such as ``@daily``), its EventBridge form.

    Example:
        >>> _unix_cron_hint("0 2 1 * 1")
        " (a crontab's '0 2 1 * 1' runs on either day; here that is two jobs' schedules)"
        >>> _unix_cron_hint("0 2 * * *"), _unix_cron_hint("cron(0 2 * * *)").endswith("? *)' here)")
        (" (a crontab's '0 2 * * *' is 'cron(0 2 * * ? *)' here)", True)
        >>> _unix_cron_hint("0 3 * * MON"), _unix_cron_hint("@daily")
        (" (a crontab's '0 3 * * MON' is 'cron(0 3 ? * MON *)' here)", " (a crontab's '@daily' is \
'cron(0 0 * * ? *)' here)")
        >>> _unix_cron_hint("cron(0 3 ? * MON-FRI)")  # (EventBridge's, a field short)
        " (its year is missing: 'cron(0 3 ? * MON-FRI *)')"
        >>> _unix_cron_hint("30 9 * * 1-5")
        " (a crontab's '30 9 * * 1-5' is 'cron(30 9 ? * <days> *)' here, its days of the week by name \
(MON-FRI) or from SUN=1, not 0)"
    """
    if text in _MACROS:
        return f" (a crontab's {text!r} is {_MACROS[text]!r} here)"
    match = _CRON.match(text)
    fields = (match["body"] if match else text).split()
    if len(fields) != 5:
        return ""
    minute, hour, dom, month, dow = fields
    if "?" in (dom, dow):  # (no crontab has '?': an EventBridge cron without its year)
        return f" (its year is missing: 'cron({' '.join(fields)} *)')"
    if dow == "*":
        return f" (a crontab's {text!r} is 'cron({minute} {hour} {dom} {month} ? *)' here)"
    if dom != "*":  # (a crontab runs on either day; here one day field is '?': two schedules)
        return f" (a crontab's {text!r} runs on either day; here that is two jobs' schedules)"
    if re.fullmatch(r"[A-Za-z,-]+", dow):  # (names mean the same days here)
        return f" (a crontab's {text!r} is 'cron({minute} {hour} ? {month} {dow.upper()} *)' here)"
    return (
        f" (a crontab's {text!r} is 'cron({minute} {hour} ? {month} <days> *)' here, its days of "
        "the week by name (MON-FRI) or from SUN=1, not 0)"
    )


def check_schedule(expression: str, timezone: str, payload: object) -> str:
    """The checks of a job's :class:`~jobframework.jobs.Schedule`: a recurring expression Scheduler
    accepts (returned stripped), an IANA time zone, a dict payload.

    Raises:
        ConfigurationError: one line naming what to change.
    """
    text = check_expression(expression, recurring=True)
    if is_one_time(text):
        raise ConfigurationError(
            f"schedule {text!r}: a job's schedule recurs; use rate(...) or cron(...), "
            "and enqueue(..., delay=...) for a one-time run"
        )
    check_timezone(timezone)
    if not isinstance(payload, dict):
        raise ConfigurationError(f"Schedule payload= is a dict of the job's fields, got {payload!r}")
    return text


def is_one_time(expression: str) -> bool:
    """Whether the expression is a one-time ``at(...)``."""
    return expression.strip().startswith("at(")


def _fail(expression: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"schedule {expression!r}: {problem}")


def _check_rate(text: str) -> None:
    m = _RATE.match(text)
    if not m:
        raise _fail(text, "a rate is 'rate(value unit)', e.g. 'rate(5 minutes)' or 'rate(1 hour)'")
    value_text, unit = m.group("value"), m.group("unit")
    if not value_text.isdigit():
        raise _fail(text, f"the rate value {value_text!r} must be a whole number of at least 1")
    value = int(value_text)
    if value < 1:
        raise _fail(text, "the rate value must be at least 1 (Scheduler refuses 0)")
    singular = unit.removesuffix("s")
    if singular not in _RATE_UNITS:
        raise _fail(text, f"the unit {unit!r} is not one of minute(s), hour(s), day(s)")
    wanted = singular if value == 1 else f"{singular}s"
    if unit != wanted:
        number = "singular" if value == 1 else "plural"
        raise _fail(
            text, f"Scheduler wants the {number} '{wanted}' for {value}: write 'rate({value} {wanted})'"
        )


def _check_at(text: str) -> None:
    m = _AT.match(text)
    when = m.group("when") if m else ""
    try:
        parsed = datetime.strptime(when, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise _fail(
            text, "a one-time schedule is 'at(yyyy-mm-ddThh:mm:ss)', e.g. 'at(2027-01-31T09:00:00)'"
        ) from None
    if parsed.strftime("%Y-%m-%dT%H:%M:%S") != when:
        raise _fail(text, "write the time with two-digit fields: 'at(yyyy-mm-ddThh:mm:ss)'")


def _check_cron(text: str) -> None:
    m = _CRON.match(text)
    if not m:
        raise _fail(text, "a cron is 'cron(minutes hours day-of-month month day-of-week year)'")
    fields = m.group("body").split()
    if len(fields) != len(_FIELDS):
        raise _fail(
            text,
            f"EventBridge cron takes six fields (minutes hours day-of-month month day-of-week year), got "
            f"{len(fields)}; e.g. 'cron(0 12 * * ? *)' is every day at 12:00" + _unix_cron_hint(text),
        )
    dom, dow = fields[2], fields[4]
    if (dom == "?") == (dow == "?"):
        raise _fail(
            text,
            "exactly one of day-of-month and day-of-week must be '?' (e.g. 'cron(0 12 * * ? *)' or "
            "'cron(0 12 ? * MON-FRI *)')",
        )
    for spec, value in zip(_FIELDS, fields, strict=True):
        if value == "?" and spec.name in ("day-of-month", "day-of-week"):
            continue
        if "?" in value:
            raise _fail(text, f"'?' stands alone, and only in day-of-month or day-of-week (got {value!r})")
        for item in value.split(","):
            _check_item(text, spec, item)


def _check_item(text: str, spec: _Field, item: str) -> None:
    if not item:
        raise _fail(text, f"the {spec.name} field has an empty list item")
    if spec.name == "day-of-month" and _special_dom(text, item):
        return
    if spec.name == "day-of-week" and _special_dow(text, item):
        return
    base, slash, step = item.partition("/")
    if slash and (not step.isdigit() or int(step) < 1):
        raise _fail(text, f"the increment in {spec.name} {item!r} must be a whole number >= 1")
    if base == "*":
        return
    low, dash, high = base.partition("-")
    _value(text, spec, low)
    if dash:
        _value(text, spec, high)


def _value(text: str, spec: _Field, token: str) -> int:
    upper = token.upper()
    if upper in spec.names:
        return spec.low + spec.names.index(upper)
    if not token.isdigit():
        named = f" or {spec.names[0]}-{spec.names[-1]}" if spec.names else ""
        raise _fail(text, f"{spec.name} {token!r} is not a number{named}")
    number = int(token)
    if not spec.low <= number <= spec.high:
        raise _fail(text, f"{spec.name} {number} is outside {spec.low}-{spec.high}")
    return number


def _special_dom(text: str, item: str) -> bool:
    """``L`` (last day) and ``nW`` (the weekday nearest day n)."""
    if item.upper() == "L":
        return True
    if item.upper().endswith("W"):
        _value(text, _FIELDS[2], item[:-1])
        return True
    return False


def _special_dow(text: str, item: str) -> bool:
    """``L`` (Saturday), ``nL`` (the last day n of the month) and ``n#k`` (the k-th day n, k 1-5)."""
    if item.upper() == "L":
        return True
    if item.upper().endswith("L"):
        _value(text, _FIELDS[4], item[:-1])
        return True
    if "#" in item:
        day, _, nth = item.partition("#")
        _value(text, _FIELDS[4], day)
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise _fail(text, f"in day-of-week {item!r} the week after '#' must be 1-5")
        return True
    return False


def check_timezone(name: str) -> str:
    """The IANA time zone name if it is one (``Europe/Paris``); else a one-line error.

    Raises:
        ConfigurationError: not a time zone this machine's tz database knows.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigurationError(
            f"schedule timezone {name!r} is not an IANA time zone; use e.g. 'UTC' or 'Europe/Paris'"
        ) from None
    return name


def rate_seconds(expression: str) -> int | None:
    """The period of a ``rate(...)`` expression in seconds, or ``None`` for any other.

    Example:
        >>> rate_seconds("rate(5 minutes)"), rate_seconds("rate(1 day)"), rate_seconds("cron(0 2 * * ? *)")
        (300, 86400, None)
    """
    m = _RATE.match(expression.strip())
    if not m or not m.group("value").isdigit():
        return None
    unit = m.group("unit").removesuffix("s")
    return int(m.group("value")) * {"minute": 60, "hour": 3600, "day": 86400}.get(unit, 0) or None


def cron_matches(expression: str, moment: datetime) -> bool:
    """Whether ``moment`` (a local time of the schedule's zone) is a time of ``cron(...)``, as
    EventBridge reads its fields (``L``, ``nW``, ``nL`` and ``n#k`` too): no croniter, which the Lambda
    bundle does not carry. Seconds must be 0.

    Example:
        >>> cron_matches("cron(0 2 ? * MON-FRI *)", datetime(2026, 12, 7, 2, 0))  # a Monday
        True
        >>> cron_matches("cron(0 2 ? * MON-FRI *)", datetime(2026, 12, 6, 2, 0))  # a Sunday
        False
        >>> cron_matches("cron(15 10 L * ? *)", datetime(2026, 2, 28, 10, 15))
        True
    """
    fields = _CRON.match(expression.strip())
    if fields is None or moment.second or moment.microsecond:
        return False
    values = (
        moment.minute,
        moment.hour,
        moment.day,
        moment.month,
        (moment.weekday() + 1) % 7 + 1,  # EventBridge's 1 is Sunday
        moment.year,
    )
    for spec, field, value in zip(_FIELDS, fields.group("body").split(), values, strict=True):
        if field != "?" and not any(
            _item_matches(expression, spec, i, value, moment) for i in field.split(",")
        ):
            return False
    return True


def _item_matches(expression: str, spec: _Field, item: str, value: int, moment: datetime) -> bool:
    upper = item.upper()
    last_day = calendar.monthrange(moment.year, moment.month)[1]
    if spec.name == "day-of-month" and upper == "L":
        return value == last_day
    if spec.name == "day-of-month" and upper.endswith("W"):
        return value == _nearest_weekday(moment.year, moment.month, int(item[:-1]), last_day)
    if spec.name == "day-of-week" and upper == "L":
        return value == 7
    if spec.name == "day-of-week" and upper.endswith("L"):
        return value == _value(expression, spec, item[:-1]) and moment.day + 7 > last_day
    if spec.name == "day-of-week" and "#" in item:
        day, _, nth = item.partition("#")
        return value == _value(expression, spec, day) and (moment.day - 1) // 7 + 1 == int(nth)
    base, slash, step_text = item.partition("/")
    step = int(step_text) if slash else 1
    if base == "*":
        low, high = spec.low, spec.high
    else:
        first, dash, last = base.partition("-")
        low = _value(expression, spec, first)
        high = _value(expression, spec, last) if dash else (spec.high if slash else low)
    if low <= high:
        return low <= value <= high and (value - low) % step == 0
    span = spec.high - spec.low + 1  # (a range that wraps: FRI-MON)
    offset = value - low if value >= low else value - low + span if value <= high else -1
    return offset >= 0 and offset % step == 0


def _nearest_weekday(year: int, month: int, day: int, last_day: int) -> int:
    """The day of the month ``nW`` means: the weekday nearest ``day``, within the month."""
    day = min(day, last_day)
    weekday = calendar.weekday(year, month, day)  # Monday 0 ... Sunday 6
    if weekday == 5:  # Saturday: the Friday before, or the Monday after the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: the Monday after, or the Friday before the last day
        return day + 1 if day < last_day else day - 2
    return day
