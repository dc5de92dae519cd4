"""Keyword terms out of identifiers and glued words, and BM25 that finds text with glued words."""
from __future__ import annotations

from rag.bm25 import Bm25Index
from rag.words import Splitter, vocabulary

CORPUS = ["An RSA key with 4096 bits signs the release. It is a good idea.",
          "Currently,anRSAkeywith4096bitsisagoodideaforsigning.",
          "Sourdough bread rises because yeast ferments the dough."]


def test_glued_words_are_split_with_the_collection_vocabulary():
    split = Splitter(vocabulary(CORPUS + ["Keys for signing."]))
    terms = split("Currently,anRSAkeywith4096bitsisagoodideaforsigning.")
    assert {"key", "bits", "good", "idea", "signing"} <= set(terms)
    assert split("configuration") == ["configuration"]            # a plain word stays whole
    assert split("snake_case HTMLParser") == ["snake_case", "snake", "case", "htmlparser", "html", "parser"]


def test_bm25_matches_words_inside_a_glued_chunk():
    texts = CORPUS + ["Always check the digest: guard the tarball against tampering.",
                      "Alwayscheckthedigestofthereleasetarballagainsttampering."]
    index = Bm25Index(["plain", "glued", "bread", "guard", "glued2"], texts)
    found = dict(index.search("release tarball tampering", 5))
    assert "glued2" in found and found["glued2"] > found.get("plain", 0)
