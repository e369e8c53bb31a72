"""The lesson "Not every CUDA error is a memory error": the numbers its quiz shows.

The lesson's tables come from :mod:`gpulesson.errors` and the example errors' data; what
is its own here is :func:`driver_version_readings`, the options of its question on a
"driver too old" message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def driver_version_readings(facts: Mapping[str, Any]) -> dict[str, str]:
    """The CUDA version in a "driver too old" message, and two ways to misread the number.

    Reads ``errors.driver_code`` (the number in the message, 1000 x major + 10 x
    minor), ``errors.driver_major`` and ``errors.driver_minor`` (what ``gpulesson
    diagnose`` read). ``release`` takes the number for the driver's own release
    (like 470.82); ``major_only`` drops the minor version.

    >>> driver_version_readings({"errors.driver_code": 11040, "errors.driver_major": 11,
    ...                          "errors.driver_minor": 4})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'code': '11040', 'version': '11.4', 'major': '11', 'minor': '4', 'release': '110.40',
     'major_only': '11.0'}
    >>> driver_version_readings({"errors.driver_code": 12000, "errors.driver_major": 12,
    ...                          "errors.driver_minor": 0})
    Traceback (most recent call last):
    ...
    ValueError: driver_version_readings: CUDA 12.0 reads like its major-only misreading
    """
    code = int(facts["errors.driver_code"])
    major, minor = int(facts["errors.driver_major"]), int(facts["errors.driver_minor"])
    if minor == 0:
        raise ValueError(
            f"driver_version_readings: CUDA {major}.0 reads like its major-only misreading"
        )
    return {
        "code": str(code),
        "version": f"{major}.{minor}",
        "major": str(major),
        "minor": str(minor),
        "release": f"{code / 100:.2f}",
        "major_only": f"{major}.0",
    }
