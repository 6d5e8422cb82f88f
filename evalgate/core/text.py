"""Text as a reader sees it: one normal form for every place that compares model text, or a name, with fixed words
(the judge's echo filter, the refusal phrases, rater names), so that what looks the same compares the same."""

from __future__ import annotations

import functools
import unicodedata

import regex

_BASE = ("LATIN", "COMMON")  # the scripts the fixed words are written in: letters, digits, brackets, punctuation
_UNSEEN = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]+")
"""What a reader does not see: format characters (Unicode category Cf) and every default-ignorable code point
(Unicode's Default_Ignorable_Code_Point property, which renderers draw as nothing: the combining grapheme joiner
U+034F, the variation selectors U+FE00-FE0F and U+E0100-E01EF, Khmer's inherent vowels U+17B4-17B5, Mongolian's
free variation selectors), none of them Cf."""
_BLANK = str.maketrans(dict.fromkeys("\u115f\u1160\u2800", " "))
"""Letters that fonts draw as blank space, read as a space: the Hangul fillers (U+3164 and U+FFA0, which NFKC
makes U+1160, U+115F) and the braille blank U+2800."""


@functools.lru_cache(maxsize=8192)
def look_alike(c: str) -> str:
    """The Latin or common character(s) that one character ``c`` is a homoglyph of (Cyrillic ``А`` -> ``A``, Greek
    ``ο`` -> ``o``), else ``c``. From the Unicode confusables table (UTS #39, ``confusables.txt``) as the
    ``confusable_homoglyphs`` package ships it: a character of another script that the table lists as confusable
    with a Latin or common one is taken as that one (the first such in the table's list)."""
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(c, greedy=True, preferred_aliases=["latin", "common"])
    for entry in found or ():
        for glyph in entry["homoglyphs"]:
            if all(_alias(g) in _BASE for g in glyph["c"]):
                return str(glyph["c"])
    return c


def _alias(c: str) -> str:
    from confusable_homoglyphs import categories

    return str(categories.alias(c))


def as_read(text: str) -> str:
    """``text`` as a reader sees it: NFKC (fullwidth ``［［１０］］`` is ``[[10]]``), what is drawn as nothing removed
    (``_UNSEEN``: zero-width spaces and joiners, word joiners, bidirectional marks, the combining grapheme joiner,
    variation selectors), letters drawn as blank space written as a space (``_BLANK``: the Hangul fillers, the
    braille blank), and each letter of another script that looks like a Latin or common character written as that
    one (``look_alike``: a Cyrillic ``[[А]]`` is ``[[A]]``; the table's prototype of a capital may be another letter:
    Greek ``Ι`` is ``l``, so fold case first where case does not matter). Case and white space are kept. Text in
    another script reads differently from its original, so compare only texts that both went through this
    function."""
    if text.isascii():
        return text  # NFKC keeps ASCII, which holds nothing unseen or blank
    folded = _UNSEEN.sub("", unicodedata.normalize("NFKC", text).translate(_BLANK))
    if folded.isascii():
        return folded
    return "".join(c if c.isascii() else look_alike(c) for c in folded)


def name_key(name: str) -> str:
    """The form two names are compared in: ``as_read``, white space runs made one space and trimmed, case folded
    (``"Alice "``, ``"alice"``, fullwidth ``ａｌｉｃｅ`` and ``аlice`` with a Cyrillic ``а`` are one name)."""
    return " ".join(as_read(name.casefold()).split()).casefold()  # folded first: Greek Ι is i (as l when capital)
