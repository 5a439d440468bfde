"""The page's language (issue 28): Django's LocaleMiddleware picks it from the browser (Accept-Language) or the
language cookie; `?lang=fr` in a link wins, so a shared link keeps its language. Only the site's own words are
translated: the model's text (its tokens, the reply, the chat template) never is."""
from django.conf import settings
from django.utils import translation

QUERY = "lang"


def supported(code: str | None) -> str | None:
    """The site language a `?lang=` value names (fr, es, zh-hans; zh and zh-cn read as zh-hans), or None."""
    if not code:
        return None
    code = code.strip().lower().replace("_", "-")
    code = {"zh": "zh-hans", "zh-cn": "zh-hans", "zh-sg": "zh-hans"}.get(code, code)
    return code if code in dict(settings.LANGUAGES) else None


class LanguageFromQuery:
    """After LocaleMiddleware: a valid `?lang=` activates that language for this request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        code = supported(request.GET.get(QUERY))
        if code:
            translation.activate(code)
            request.LANGUAGE_CODE = code
        return self.get_response(request)


def switcher(request) -> dict:
    """Template context: the languages with the link to this page in each (its other query parameters kept)."""
    query = request.GET.copy()
    links = []
    for code, name in settings.LANGUAGES:
        query[QUERY] = code
        links.append({"code": code, "name": name, "href": f"{request.path}?{query.urlencode()}"})
    return {"site_languages": links}
