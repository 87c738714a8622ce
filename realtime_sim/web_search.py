"""The Responses API's built-in web search, as the simulator serves it.

When a request offers `{"type": "web_search"}` and the question needs live facts (a scripted
search, or by default one that asks about today, the news, the weather, a score), the response
carries what the real API sends:

- a `web_search_call` output item (`id` "ws_...", `status` "completed", `action` {"type":
  "search", "query": ...}; the action's `sources` only when the request's `include` asks for
  "web_search_call.action.sources"), before
- the `message`, whose `output_text` names each source inline, "([example.org](url))", with a
  `url_citation` annotation (`start_index`, `end_index` of that inline span, `url`, `title`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote_plus, urlsplit

from realtime_sim.ids import IdFactory
from realtime_sim.script import BrainSearch

SEARCH_TOOL_TYPES = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26"})
_LIVE = re.compile(r"\b(today|tonight|tomorrow|yesterday|last night|latest|news|weather|forecast|score|won|who won|"
                   r"this week|right now|currently|current)\b", re.I)  # fmt: skip
SOURCES_INCLUDE = "web_search_call.action.sources"


def offered(body: dict[str, Any]) -> bool:
    return any(isinstance(t, dict) and t.get("type") in SEARCH_TOOL_TYPES for t in body.get("tools") or [])


def wants_search(question: str) -> bool:
    """Whether a model would search for this question (it asks about what changes)."""
    return bool(_LIVE.search(question))


def default_search(question: str) -> BrainSearch:
    url = f"https://news.example.org/search?q={quote_plus(question)[:80]}&utm_source=openai"
    return BrainSearch(f"Here is what the web says about {question}.", (("Example News", url),))


def searched_output(ids: IdFactory, body: dict[str, Any], question: str, found: BrainSearch) -> list[dict[str, Any]]:
    """The output items of a response that searched: the call, then the message citing its pages."""
    action: dict[str, Any] = {"type": "search", "query": question}
    if SOURCES_INCLUDE in (body.get("include") or []):
        action["sources"] = [{"type": "url", "url": url} for _, url in found.sources]
    text, annotations = found.text, []
    for title, url in found.sources:
        inline = f" ([{urlsplit(url).hostname}]({url}))"
        start = len(text.rstrip(".")) if text.endswith(".") else len(text)
        text = text[:start] + inline + text[start:]
        annotations.append({"type": "url_citation", "start_index": start, "end_index": start + len(inline),
                            "url": url, "title": title})  # fmt: skip
    return [
        {"id": ids.new("ws", 48), "type": "web_search_call", "status": "completed", "action": action},
        {"id": ids.new("msg", 48), "type": "message", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}]},
    ]  # fmt: skip
