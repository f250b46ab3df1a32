"""Traditional Chinese read as Simplified, and a query in both scripts.

The rule, revocation, correction, attribute and replacement models were fitted on Simplified
Chinese, and the cue words the extractor and the guards look for are written in it. A user in
Taiwan or Hong Kong writes "以後訂機票一律訂經濟艙。" for "以后订机票一律订经济舱。": a different
character in most words, so the models' character n-grams and the cues missed most of it.
:func:`simplified` is what those readers see; what is stored, pinned and shown stays as the
user wrote it. Keyword search matches the text as stored, so a query is searched in both scripts
(:func:`both_scripts`): a note kept in Traditional characters is found by a query in Simplified
ones, and the other way round.
"""

from __future__ import annotations

import re

import opencc

__all__ = ["both_scripts", "simplified"]

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# OpenCC's character and phrase table from Traditional to Simplified; it leaves Simplified
# text as it is (every Chinese sentence of the rule corpus and of MemDaily), where the
# regional tables (tw2sp) also rewrite words ("行程" -> "进程")
_T2S = opencc.OpenCC("t2s")
_S2T = opencc.OpenCC("s2t")


def simplified(text: str) -> str:
    """``text`` with its Traditional Chinese characters as Simplified ones; text with no Han
    character is returned as it is."""
    return _T2S.convert(text) if _HAN.search(text) else text


def both_scripts(text: str) -> list[str]:
    """``text``, then ``text`` in Simplified and in Traditional characters where that differs."""
    if not _HAN.search(text):
        return [text]
    return list(dict.fromkeys((text, _T2S.convert(text), _S2T.convert(text))))
