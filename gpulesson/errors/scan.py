"""Find phrases and messages in a long text in linear time, whatever the text holds.

One job: the searching that :mod:`gpulesson.errors.diagnose` and
:mod:`gpulesson.errors.numbers` need, done so that a crafted 4 MiB input (the
CLI's limit) costs a few passes at C speed, never a quadratic regex search.

The steps, for a :class:`Haystack`:

1. Normalise once: escaped newlines undone, every run of whitespace one space
   (``str.split``, not a regex substitution).
2. Encode the raw and the normalised text as UTF-8 and lower-case their ASCII
   letters (``bytes.lower``: the lengths stay the same, so a position found in
   the lower-case copy is the same position in the original).
3. Case-insensitive phrases are found with ``bytes.find`` / ``rfind`` on the
   lower-case copy. A regular expression runs only when one of the literal
   phrases any of its matches must contain (its *needles*) occurs.
4. A message is read from a bounded window after the phrase that starts it
   (:meth:`Haystack.window`); a number longer than any real size that starts in
   the window is followed to its end and refused (:meth:`Haystack.check_sizes`).

The trade-off: patterns are written case-sensitively (as PyTorch, CUDA and NCCL
print them); only the literal phrases are matched in any case.

>>> h = Haystack.of("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
>>> h.first(("cuda out of memory",))
(14, 'CUDA out of memory')
>>> h.window(h.last(("cuda out of memory",)), chars=24)
'CUDA out of memory. Tried to'
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# A size never has more integer digits than this (2**64 bytes has 20).
MAX_SIZE_DIGITS = 20
# How far the window may grow past its nominal end, to finish the word (or two) it cut.
_WORD_SLACK = 64
_LONG_NUMBER = re.compile(rb"(?<![0-9])[0-9]{%d}" % (MAX_SIZE_DIGITS + 1))
_DIGITS = re.compile(rb"[0-9]*(?:[.,][0-9]*)?")
_UNIT_AFTER = re.compile(rb"\s?(bytes|byte|B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)\b", re.IGNORECASE)


def normalize(text: str) -> str:
    """Join wrapped lines and escaped newlines into one line of single spaces.

    >>> normalize("Tried to allocate \\\\\\n 4.03   GiB.\\\\nGPU 0")
    'Tried to allocate 4.03 GiB. GPU 0'
    """
    text = text.replace("\\\n", " ").replace("\\n", " ").replace("\\t", " ")
    return " ".join(text.split())


@dataclass(frozen=True)
class Haystack:
    """A text prepared once for linear-time searching: raw and normalised, as UTF-8."""

    text: str  # the text as given
    flat_text: str  # normalize(text)
    raw: bytes
    raw_lower: bytes
    flat: bytes
    flat_lower: bytes

    @classmethod
    def of(cls, text: str) -> Haystack:
        """Prepare ``text``: normalise it, encode both forms, lower-case their ASCII letters."""
        flat_text = normalize(text)
        raw = text.encode("utf-8", errors="replace")
        flat = flat_text.encode("utf-8", errors="replace")
        return cls(
            text=text,
            flat_text=flat_text,
            raw=raw,
            raw_lower=raw.lower(),
            flat=flat,
            flat_lower=flat.lower(),
        )

    def first(self, phrases: Iterable[str], *, raw: bool = False) -> tuple[int, str] | None:
        """The leftmost occurrence of any lower-case ``phrase``: (byte offset, text as written)."""
        lower, original = (self.raw_lower, self.raw) if raw else (self.flat_lower, self.flat)
        best: int | None = None
        length = 0
        for phrase in phrases:
            needle = phrase.encode("utf-8")
            at = lower.find(needle)
            if at != -1 and (best is None or at < best):
                best, length = at, len(needle)
        if best is None:
            return None
        return best, original[best : best + length].decode("utf-8", errors="replace")

    def last(self, phrases: Iterable[str]) -> int | None:
        """The byte offset of the rightmost occurrence of any lower-case phrase in the flat text."""
        found = [self.flat_lower.rfind(p.encode("utf-8")) for p in phrases]
        best = max(found, default=-1)
        return None if best == -1 else best

    def contains(self, phrases: Iterable[str], *, raw: bool = False) -> bool:
        """Whether any of the lower-case ``phrases`` occurs."""
        lower = self.raw_lower if raw else self.flat_lower
        return any(p.encode("utf-8") in lower for p in phrases)

    def search(
        self, pattern: re.Pattern[bytes], needles: Iterable[str], *, raw: bool = False
    ) -> re.Match[bytes] | None:
        """``pattern.search`` over the text, run only when one of its needles occurs."""
        if not self.contains(needles, raw=raw):
            return None
        return pattern.search(self.raw if raw else self.flat)

    def window(self, start: int, chars: int) -> str:
        """About ``chars`` bytes of the flat text from ``start``, ending at a word boundary.

        The cut is moved to the end of the word it falls in and of the next word
        (a number and its unit), but never more than 2 x 64 bytes further.
        """
        end = start + chars
        for _ in range(2):
            if end >= len(self.flat):
                break
            space = self.flat.find(b" ", end + 1, end + 1 + _WORD_SLACK)
            end = space if space != -1 else min(end + _WORD_SLACK, len(self.flat))
        return self.flat[start:end].decode("utf-8", errors="replace")

    def check_sizes(self, start: int, chars: int) -> None:
        """Refuse a size with more than MAX_SIZE_DIGITS digits starting in the window.

        Raises ``ValueError`` naming the number's length: no allocator can be
        asked for more than 2**64 bytes, so the text is not an error message as
        PyTorch printed it.

        >>> Haystack.of("Tried to allocate " + "7" * 400 + " GiB").check_sizes(0, 100)
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: the message states a size of 7777777777…7777777777 GiB (400 digits), ...
        """
        end = min(start + chars + _WORD_SLACK, len(self.flat))
        for match in _LONG_NUMBER.finditer(self.flat, start, end):
            number_end = _DIGITS.match(self.flat, match.start()).end()
            unit = _UNIT_AFTER.match(self.flat, number_end)
            if unit:
                number = self.flat[match.start() : number_end].decode("ascii")
                raise ValueError(oversized(number, unit.group(1).decode("ascii")))


def oversized(number: str, unit: str) -> str:
    """The message for a size too large for any allocator.

    >>> oversized("1" * 30, "GiB").startswith("the message states a size of 1111111111…")
    True
    """
    whole = re.split(r"[.,]", number, maxsplit=1)[0]
    shown = number if len(number) <= 24 else f"{number[:10]}…{number[-10:]}"
    return (
        f"the message states a size of {shown} {unit} ({len(whole)} digits), more than "
        "2**64 bytes, which no allocator can be asked for: paste the error message as "
        "PyTorch printed it"
    )
