"""A rendered page as a flat list of parser events, for tests that find elements and read their text."""
from __future__ import annotations

import html.parser


class Dom(html.parser.HTMLParser):
    """The page as a flat list of events in document order: ("start", tag, attrs), ("text", data), ("end", tag)."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.events: list[tuple] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.events.append(("start", tag, dict(attrs)))

    def handle_endtag(self, tag):
        self.events.append(("end", tag))

    def handle_data(self, data):
        self.events.append(("text", data))

    def find(self, tag=None, **attrs) -> list[int]:
        """Indices of the start tags with that tag name and those attribute values (``data_x`` is ``data-x``,
        ``class_`` is ``class``)."""
        want = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        return [i for i, e in enumerate(self.events) if e[0] == "start" and (tag is None or e[1] == tag)
                and all(e[2].get(k) == v for k, v in want.items())]

    def text(self, i: int) -> str:
        """The text inside the element that starts at event ``i``."""
        tag, depth, out = self.events[i][1], 0, []
        for e in self.events[i:]:
            if e[0] == "start" and e[1] == tag:
                depth += 1
            elif e[0] == "end" and e[1] == tag:
                depth -= 1
                if depth == 0:
                    break
            elif e[0] == "text":
                out.append(e[1])
        return " ".join("".join(out).split())


# ---- pure pieces -------------------------------------------------------------------------------------------------
