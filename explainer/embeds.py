"""Embed pages: one section of the article alone, live or replaying a recording (docs/embedding.md)."""
import json
import re
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.exceptions import BadRequest
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import render
from django.templatetags.static import static
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods
from django.views.i18n import JSONCatalog

from explainer.models import RecordedRun
from explainer.services import recordings, slices
from explainer.words import in_language, say
from inference.wire.said import said

# section slug (the element is <he-SLUG>) -> (the article's anchor, the section's title)
SECTIONS = {
    "template": ("template", _("Your messages become one string")),
    "tokens": ("tokens", _("The string becomes tokens")),
    "embeddings": ("embeddings", _("Each token looks up a row of numbers")),
    "positions": ("positions", _("Where each token sits")),
    "mask": ("mask", _("Reading the prompt, no peeking ahead")),
    "attention": ("attention", _("Attention: who looks at whom")),
    "layers": ("layers", _("Through the layers")),
    "logits": ("logits", _("One score per vocabulary entry")),
    "stages": ("stages", _("Reshaping the scores")),
    "filter": ("filter", _("Who survives the filters")),
    "dice": ("dice", _("Rolling the dice")),
    "sequence": ("sequence", _("One token at a time")),
    "kv": ("kv", _("The cache that makes it fast")),
    "stream": ("stream", _("Streaming to your screen")),
    "stop": ("stop", _("Knowing when to stop")),
    "context": ("context", _("The context window")),
    "myths": ("myths", _("What did not happen")),
    "timeline": ("timeline", _("Prefill vs decode")),
    "kvcalc": ("kvcalc", _("How big the KV cache gets")),
    "batch": ("batching", _("Batching, and why temperature 0 can still differ")),
    "speculative": ("speculative", _("Speculative decoding")),
    "quant": ("quantization", _("Quantization")),
}
# Query parameters a live embed passes on to its element (and from there into its `start` frame).
LIVE_PARAMS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
               "frequency_penalty", "max_new_tokens", "seed")
# What to show (docs/embedding.md, "Choosing what to show"): the element's attributes of the same names.
CHOICE_PARAMS = ("step", "layer", "head", "controls", "caption")
# A static page's `assets`: where the saved file will find a copy of static/ (a relative or site path, never a host).
ASSETS = re.compile(r"(?!.*//)(?!.*\.\.\.)[A-Za-z0-9_.~/-]*/\Z")
DEFAULT_PROMPT = "The mole on my face may need a biopsy. Explain this simply."
THEMES = ("auto", "light", "dark")  # an element's `theme` attribute, an iframe's ?theme=
CAPTION_CHARS = 300  # an author's own caption (lib/choose.js, CAPTION_CHARS)
MAX_ATTRIBUTE_CHARS = 2000  # a query string is no place for a document; the server caps the prompt anyway


def example_ids() -> list[str]:
    """The example runs shipped in static/examples/ (index.json), the article's own first."""
    index = finders.find("examples/index.json")
    if not index:
        return []
    with open(index, encoding="utf-8") as file:
        return [entry["id"] for entry in json.load(file)]


def _example_or_404(example: str) -> str:
    if example not in example_ids():
        raise Http404("no example run with this id")
    return example


def _run_or_404(run_id: str) -> str:
    if not RecordedRun.exists(run_id):  # the row is not read here: a damaged one is named where it is read
        raise Http404("no recorded run with this id")
    return run_id


def choices(query) -> list[tuple[str, str]]:
    """`step`, `layer`, `head`, `controls`, `caption` as given (the element resolves them, lib/choose.js)."""
    return [(name, query[name][:CAPTION_CHARS if name == "caption" else 40]) for name in CHOICE_PARAMS if query.get(name, "") != ""]


def element_attributes(query) -> list[tuple[str, str]]:
    """The element's attributes from the query: `run`, `example`, or the live prompt, `autostart` and params; then the choices."""
    if query.get("run"):  # `compare`: a saved compare run's run B beside run A (issue 29)
        pair = [("compare", "")] if query.get("compare", "") not in ("", "0", "false", "no") else []
        return [("run", _run_or_404(query["run"])), *pair, *choices(query)]
    if query.get("example"):
        return [("example", _example_or_404(query["example"])), *choices(query)]
    attributes = [("prompt", query.get("prompt", DEFAULT_PROMPT)[:MAX_ATTRIBUTE_CHARS])]
    if query.get("autostart", "") not in ("", "0", "false", "no"):
        attributes.append(("autostart", ""))
    attributes += [(name, query[name][:40]) for name in LIVE_PARAMS if query.get(name, "") != ""]
    return attributes + choices(query)


def article_link(section: str, run_id: str | None = None) -> str:
    """The full article at this section (the replay page for a recording), in the page's language."""
    page = f"/runs/{run_id}" if run_id else "/"
    return f"{page}{language_query()}#{SECTIONS[section][0]}"


def language_query(joiner: str = "?") -> str:
    """`?lang=xx` for a link from a page not in English (so the page it opens keeps the language), else ""."""
    code = translation.get_language() or settings.LANGUAGE_CODE
    return "" if code == settings.LANGUAGE_CODE else f"{joiner}{urlencode({'lang': code})}"


# Frameable by other sites: explainer.security lifts X-Frame-Options and sets frame-ancestors for /embed/.
@require_http_methods(["GET", "HEAD"])
def embed_section(request, section: str):
    """`/embed/<section>/`: the section's diagram alone, live (own session) or `?run=<id>` (a recording)."""
    if section not in SECTIONS:
        raise Http404(f"no section {section!r}; one of {', '.join(SECTIONS)}")
    attributes = element_attributes(request.GET)
    run_id = attributes[0][1] if attributes[0][0] == "run" else None
    theme = embed_theme(request.GET)
    return render(request, "embed.html", {
        "section": section, "title": SECTIONS[section][1], "attributes": [*attributes, *([("theme", theme)] if theme != "auto" else [])],
        "article_url": article_link(section, run_id), "theme": theme,
    })


def recording_of(request, attributes, section: str) -> dict:
    """The recording a static page inlines, cut to what `section` draws: a saved run (as GET /api/runs/<id>/<section>
    returns it) or a shipped example."""
    kind, value = attributes[0]
    if kind == "run":
        data = recordings.as_json(recordings.load(value))  # RecordingError if it cannot be read or replayed
        data = {**data, "article_url": request.build_absolute_uri(data["url"])}
    else:
        data = example_recording(value)
    return slices.slice_recording(data, section, SECTIONS)


def example_recording(example: str) -> dict | None:
    """A shipped example's recording file (static/examples/), or None when none ships by that id."""
    if example not in example_ids():
        return None
    with open(finders.find(f"examples/{example}.json"), encoding="utf-8") as file:
        return json.load(file)


@require_http_methods(["GET", "HEAD"])
def embed_static(request, section: str):
    """`/embed/<section>/static/?run=<id>` (or `example=`): a page to save as a file, the recording inlined."""
    if section not in SECTIONS:
        raise Http404(f"no section {section!r}; one of {', '.join(SECTIONS)}")
    if not (request.GET.get("run") or request.GET.get("example")):
        return _refused(said("run or example: a static page replays a recording (live needs the server)"))
    assets = request.GET.get("assets") or static("")
    if not ASSETS.match(assets):
        return _refused(said("assets: a relative or site path ending in /, e.g. static/ (no host)"))
    attributes = element_attributes(request.GET)
    run_id = attributes[0][1] if attributes[0][0] == "run" else None
    try:
        recording = recording_of(request, attributes, section)
    except recordings.RecordingError as exc:  # a named page, as the replay page gives
        error = in_language(exc.as_dict(), translation.get_language())["error"]  # its sentence in the page's language
        return render(request, "recording_error.html", {"error": error}, status=exc.status)
    theme = embed_theme(request.GET)
    return render(request, "embed_static.html", {
        "section": section, "title": SECTIONS[section][1], "assets": assets, "theme": theme,
        "attributes": [("src", "#he-recording"), *attributes[1:], *([("theme", theme)] if theme != "auto" else [])],
        "recording": recording, "catalog": words_catalog(request),
        "article_url": request.build_absolute_uri(article_link(section, run_id)),
    })
def _refused(sentence) -> HttpResponseBadRequest:
    """A 400 an author reads in the browser: the sentence in the request's language, as plain text."""
    return HttpResponseBadRequest(say(sentence, translation.get_language()), content_type="text/plain; charset=utf-8")


def words_catalog(request) -> dict:
    """The site's words in the page's language as JSONCatalog gives them, for a page saved with no server to ask."""
    return json.loads(JSONCatalog.as_view()(request).content)


def embed_theme(query) -> str:
    """`?theme=light|dark|auto` (auto, the default, follows the reader's prefers-color-scheme)."""
    theme = query.get("theme") or "auto"
    if theme not in THEMES:
        raise BadRequest(f"theme must be one of {', '.join(THEMES)}, not {theme[:40]!r}")
    return theme


def demo_source(query) -> tuple[str, str] | None:
    """What the demo embeds: `?run=<id>`, `?example=<id>`, the article's example when one ships, else None (live)."""
    if query.get("run"):
        return "run", _run_or_404(query["run"])
    if query.get("example"):
        return "example", _example_or_404(query["example"])
    if query.get("live"):
        return None
    examples = example_ids()
    return ("example", examples[0]) if examples else None


@require_http_methods(["GET", "HEAD"])
def embed_demo(request):
    """`/embed/`: every section embedded both ways, against a recording, a shipped example, or live (`?live=1`)."""
    source = demo_source(request.GET)
    query = f"?{urlencode([source])}" if source else ""
    run_id = source[1] if source and source[0] == "run" else None
    sections = [{
        "slug": slug, "title": title, "element": f"he-{slug}", "article_url": article_link(slug, run_id),
        "src": request.build_absolute_uri(f"/embed/{slug}/{query}{language_query('&' if query else '?')}"),
    } for slug, (_anchor, title) in SECTIONS.items()]
    return render(request, "embed_demo.html", {
        "sections": sections, "source": source, "attributes": [source] if source else [("prompt", DEFAULT_PROMPT)],
        "script_url": request.build_absolute_uri(static("js/embed.js")),
    })
