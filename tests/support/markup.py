"""Reading a generated HTML page as a browser would, to find injected markup that would run.

`injected(html, marker)` lists what of `marker` (the code a payload would run, e.g.
"alert(document.domain)") became live markup: a <script> element whose code starts with it
(what "</script><script>alert(...)" in a page's data script makes), or an event-handler
attribute (onerror=...) holding it.
"""
from __future__ import annotations

from html.parser import HTMLParser


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        self.handlers += [f"<{tag} {name}={value!r}>" for name, value in attrs if name.startswith("on")]

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def injected(html: str, marker: str) -> list[str]:
    """Script elements whose code starts with `marker`, and event-handler attributes carrying it."""
    page = _Page()
    page.feed(html)
    page.close()
    live = [f"<script>{s}</script>" for s in page.scripts if s.strip().startswith(marker)]
    return live + [h for h in page.handlers if marker in h]
