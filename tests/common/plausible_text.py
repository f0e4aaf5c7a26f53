"""A measurable stand-in for "the answer reads like English": the share of words that are in
Debian's word list (package wamerican, /usr/share/dict/words; scripts/setup_test.sh installs it).

Measured on the default model (SmolLM2-135M-Instruct Q4_1), 20 answers each to the README's two
examples: with the llama.cpp defaults the chat example ("Name a color.") scores 0.98 on average
and the completion ("Once upon a time") 0.99; with the former defaults (temperature 1, nothing
else: `--sampling-defaults openai`) 0.89 and 0.96, with single answers down to 0.0 ("92eMath").
Tests pool several answers and compare against thresholds between the two.
"""
import pathlib
import re

WORDS_FILE = pathlib.Path("/usr/share/dict/words")
_words = None


def dictionary():
    global _words
    if _words is None:
        assert WORDS_FILE.exists(), "install the Debian package wamerican (scripts/setup_test.sh does)"
        _words = {w.strip().lower() for w in WORDS_FILE.read_text(errors="replace").splitlines()}
    return _words


def words_of(text):
    """Runs of letters, with an apostrophe part ("can't", "model's") kept."""
    return re.findall(r"[A-Za-z]+(?:'[A-Za-z]+)?", text)


def dictionary_share(texts):
    """(share of dictionary words over all the texts' words, number of words)."""
    words = [w for t in texts for w in words_of(t)]
    if not words:
        return 0.0, 0
    known = dictionary()
    return sum(w.lower() in known for w in words) / len(words), len(words)
