"""What a browser would submit from a page's form: the tests post pages back as people do."""

from __future__ import annotations

from html.parser import HTMLParser


class _FormFields(HTMLParser):
    """Inputs (checked boxes only), textareas and selected options, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        name = attributes.get("name")
        if tag == "input" and name and attributes.get("type") not in ("submit", "button"):
            if attributes.get("type") in ("checkbox", "radio") and "checked" not in attributes:
                return
            self.fields[name] = attributes.get("value") or ""
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields[name] = ""
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in attributes:
            self.fields[self._select] = attributes.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            # A browser drops the one newline that follows <textarea>.
            self.fields[self._textarea] += data.removeprefix("\n") if not self.fields[self._textarea] else data


def form_fields(page: str) -> dict[str, str]:
    """The form's values (the CSRF token left out: Django's test client does not check it)."""
    parser = _FormFields()
    parser.feed(page)
    parser.fields.pop("csrfmiddlewaretoken", None)
    return parser.fields
