"""A local stand-in for a Microsoft Teams Workflows webhook ("When a Teams webhook request is received").

Like the real one it answers before it looks at the card: 202 Accepted with an empty body for any
JSON request that carries the workflow's signature (`sig` in the query), 401 with an error document
for a wrong or missing signature, 400 for a body that is not JSON; `script(...)` makes the next
answers fail (429 with Retry-After, 5xx, a slow answer). What the flow then does with the card
happens out of the sender's sight, so the fake records it apart: `cards` holds the cards Teams would
post, `flow_failures` why a card would not be (not a message with one Adaptive Card attachment, an
element Teams does not know, a text that is not a string, or a message over Teams' 28 KB).
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fake_services import FakeService, Recorded

TEAMS_SIGNATURE = "wOrKfLoW-s1gnature-for-tests"
ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"
# Teams' message size limit (learn.microsoft.com, "Limits and specifications for Microsoft Teams").
TEAMS_MAX_MESSAGE_BYTES = 28 * 1024
CARD_ELEMENTS = {"TextBlock", "FactSet", "ColumnSet", "Container", "Image", "RichTextBlock"}


def card_problem(body: Any) -> str | None:
    """Why the flow would fail to post this body as a card in Teams, or None."""
    if not isinstance(body, dict) or body.get("type") != "message":
        return "not a message"
    attachments = body.get("attachments")
    if not isinstance(attachments, list) or len(attachments) != 1:
        return "not one attachment"
    attachment = attachments[0]
    card = attachment.get("content") if isinstance(attachment, dict) else None
    if attachment.get("contentType") != ADAPTIVE_CARD or not isinstance(card, dict):
        return "not an Adaptive Card attachment"
    if card.get("type") != "AdaptiveCard" or not isinstance(card.get("version"), str):
        return "content is not an AdaptiveCard with a version"
    elements = card.get("body")
    if not isinstance(elements, list) or not elements:
        return "card without a body"
    for element in elements:
        kind = element.get("type") if isinstance(element, dict) else None
        if kind not in CARD_ELEMENTS:
            return f"unknown element {kind!r}"
        if kind == "TextBlock" and not isinstance(element.get("text"), str):
            return "TextBlock without text"
        if kind == "FactSet" and not all(isinstance(f.get("title"), str) and isinstance(f.get("value"), str)
                                         for f in element.get("facts", [])):
            return "FactSet fact without title or value"
    for action in card.get("actions", []):
        if action.get("type") == "Action.OpenUrl" and not str(action.get("url", "")).startswith(("http://", "https://")):
            return "Action.OpenUrl without an http(s) url"
    if len(json.dumps(body, ensure_ascii=False).encode()) > TEAMS_MAX_MESSAGE_BYTES:
        return "message over Teams' 28 KB"
    return None


class FakeTeams(FakeService):
    def __init__(self, signature: str = TEAMS_SIGNATURE) -> None:
        super().__init__()
        self.signature = signature
        self.cards: list[dict[str, Any]] = []
        self.flow_failures: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return (f"http://{host}:{port}/workflows/0a1b2c/triggers/manual/paths/invoke"
                f"?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={self.signature}")

    def respond(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        if parse_qs(urlsplit(record.path).query).get("sig") != [self.signature]:
            return 401, {"Content-Type": "application/json"}, {"error": {
                "code": "DirectApiAuthorizationRequired",
                "message": "The request must be authenticated only by Shared Access scheme."}}
        try:
            body = json.loads(record.body)
        except ValueError:
            return 400, {"Content-Type": "application/json"}, {"error": {
                "code": "InvalidRequestContent", "message": "The request content is not valid JSON."}}
        problem = card_problem(body)
        if problem:
            self.flow_failures.append(problem)
        else:
            self.cards.append(body["attachments"][0]["content"])
        return 202, {"x-ms-workflow-run-id": f"0858{len(self.requests):012d}"}, b""
