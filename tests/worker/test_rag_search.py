"""Search through the route: one chunk a page in a result list, clean quotable text with
physical page numbers, and the fusion and rerank choices."""
from __future__ import annotations

VOLCANO = " ".join(f"Volcano fact {i}: magma rises through the crust and erupts as lava at the vent." for i in range(60))
PAGES = [VOLCANO, "Sourdough bread rises because wild yeast ferments the dough overnight.",
         "Honey bees dance to show where the flowers are."]


def upload(client, name, data):
    r = client.post("/v1/rag/ingest", files=[("files", (name, data))])
    assert r.status_code == 200, r.text
    return r.json()["documents"][0]


def test_a_result_list_shows_each_page_once(client, make_pdf):
    doc = upload(client, "nature.pdf", make_pdf(PAGES))
    assert doc["chunks"] > 4                     # page 1 alone fills several chunks
    hits = client.post("/v1/rag/search", json={"query": "how does magma erupt from a volcano", "k": 3}).json()["results"]
    assert [h["page"] for h in hits][0] == 1
    assert len({h["page"] for h in hits}) == len(hits) == 3


def test_hits_quote_clean_text_without_running_heads(client, make_pdf):
    head = "ACME Field Guide - internal edition"
    pages = [f"{head}\n{text}\nPage {i} of 5" for i, text in enumerate([
        "The first rule: fish are counted at dawn.", "Sourdough bread rises because yeast ferments the dough.",
        "Honey bees dance to show where the flowers are.", "Volcanoes erupt when magma reaches the surface.",
        "Glaciers carve U-shaped valleys as the ice grinds the rock."], start=1)]
    upload(client, "guide.pdf", make_pdf(pages))
    hit = client.post("/v1/rag/search", json={"query": "when are fish counted", "k": 1}).json()["results"][0]
    assert (hit["source"], hit["page"]) == ("guide.pdf", 1)
    assert hit["text"] == "The first rule: fish are counted at dawn."      # no running head, no page foot


def test_fusion_and_rerank_choices(client, make_pdf):
    upload(client, "nature.pdf", make_pdf(PAGES))
    for body in ({"fusion": "rrf", "rerank": "none"}, {"fusion": "convex", "rerank": "prf"},
                 {"rerank": "embedding"}, {"mode": "bm25"}, {"mode": "vector"}):
        r = client.post("/v1/rag/search", json={"query": "what makes bread rise", "k": 1, **body})
        assert r.status_code == 200 and r.json()["results"][0]["page"] == 2, (body, r.text)
    r = client.post("/v1/rag/search", json={"query": "bread", "rerank": "magic"})
    assert r.status_code == 400 and "prf" in r.json()["error"]["message"]
