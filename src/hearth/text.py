"""Text primitives, written once: the word tokenizer and stopwords of search, the character-based
token estimate, and unit-length vectors.

Kept free of work at import time (numpy is imported where vectors are normalised).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import numpy as np

# A word: letters and digits, with one inner apostrophe ("don't"); underscores split words.
WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)

# Function words and chat filler that carry no topic: left out of search terms and of the words the
# offline helpers treat as content.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves i'm i've i'd i'll you're it's
    that's don't didn't can't won't isn't wasn't let's also yes yeah ok okay oh hi hey hello please
    thanks thank really much well know think like want get got go going just still even ever""".split()
)

# More conversational filler the extractive (offline) helpers skip on top of STOPWORDS; search keeps
# these words, since a query such as "what did I say today" needs them to rank.
CHAT_FILLER = frozenset(
    """im dont cant cant gonna many thing things something anything one maybe lot today said say see
    tell let us way back make""".split()
)

def phrase_pattern(phrases: Sequence[str]) -> re.Pattern[str]:
    """Any of ``phrases`` as whole words, any case. The pattern first checks that the character
    is one a phrase can begin with: without that, every position of a run of line breaks or
    ``{{//`` tried each phrase in turn, sixteen times slower on such runs (U5)."""
    firsts = "".join(sorted({re.escape(p[0].lower()) for p in phrases}))
    return re.compile(rf"(?=[{firsts}])(?<!\w)(?:" + "|".join(re.escape(p) for p in phrases) + r")(?!\w)",
                      re.IGNORECASE)


CHARS_PER_TOKEN = 4
ESTIMATE_METHOD = "chars/4"
# An attached image's share of a request estimate (W14). Providers count an image by its pixels
# (OpenAI in 512-pixel tiles, Anthropic about width x height / 750, some 1,600 for the largest
# picture they keep unshrunk); Hearth does not decode images, so each counts at that ceiling.
IMAGE_TOKENS = 1_600


def estimate_tokens(chars: int) -> int:
    """Character-based token estimate: about four characters a token, rounded up."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def unit_rows(vectors: Any) -> np.ndarray:
    """Rows scaled to unit length, as float32; an all-zero row stays zero."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return (array / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
