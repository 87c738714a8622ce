"""Live answers: the brain offers the Responses API's web search tool (BRAIN_WEB_SEARCH); an
answer that searched keeps its sources (history, the page) and never says them."""

from __future__ import annotations

import dataclasses
import json

from brain import Brain
from tests.tools.test_brain import FAST, client, sim  # noqa: F401 (fixtures)
from tools.formatters import format_ask_brain
from tools.result import ToolResult

SOURCE = ("BBC Sport", "https://www.bbc.co.uk/sport/football/12345?utm_source=openai")


async def test_a_searched_answer_keeps_its_sources_and_never_says_them(sim, client) -> None:
    sim.script.push_brain_search("Arsenal beat Chelsea two to one last night.", [SOURCE])
    answer = await Brain(FAST, client).ask("who won the match last night")
    assert answer.ok and answer.text == "Arsenal beat Chelsea two to one last night."
    assert answer.citations == ({"url": SOURCE[1], "title": "BBC Sport"},)
    (request,) = sim.brain_requests
    assert request["tools"] == [{"type": "web_search"}]
    said = format_ask_brain(ToolResult("ask_brain", "c1", True, {"answer": answer.text, "citations": list(answer.citations)}))
    assert "bbc" not in said.lower() and "http" not in said


async def test_the_simulator_serves_search_as_the_api_does(sim, client) -> None:
    response = await client.responses.create(model="m", input="what's the weather tomorrow", tools=[{"type": "web_search"}],
                                             include=["web_search_call.action.sources"])
    call, message = response.output
    assert call.type == "web_search_call" and call.status == "completed" and call.action.type == "search"
    assert call.action.query == "what's the weather tomorrow" and call.action.sources[0].url.startswith("https://")
    (part,) = message.content
    (note,) = part.annotations
    assert note.type == "url_citation" and part.text[note.start_index:note.end_index] == f" ([news.example.org]({note.url}))"
    assert response.usage.input_tokens > len(json.dumps([{"type": "web_search"}])) // 4  # the tool is billed as input


async def test_without_web_search_no_tool_is_offered_and_nothing_is_searched(sim, client) -> None:
    answer = await Brain(dataclasses.replace(FAST, web_search=False), client).ask("who won the match last night")
    assert answer.ok and answer.citations == ()
    assert "tools" not in sim.brain_requests[0]
