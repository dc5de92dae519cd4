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


def test_a_dotted_version_or_file_name_is_also_one_term():
    split = Splitter()
    assert {"2.0.0", "upsd.conf", "sendmail-path"} <= set(split("NUT 2.0.0 reads upsd.conf; --sendmail-path"))
    # its parts alone are digits every release note has: the whole picks the right one
    index = Bm25Index(["v200", "v210", "bread"],
                      ["NUT 2.0.0 was released in March 2004.",
                       "Release 2.1.0 was released in 2005: 0 regressions, 2 new drivers, 0 open bugs since 2.0.",
                       "Sourdough bread rises because yeast ferments the dough."])
    assert [i for i, _ in index.search("When was version 2.0.0 released?", 3)][0] == "v200"
