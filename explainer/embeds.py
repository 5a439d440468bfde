"""Embed pages: one section of the article alone, live or replaying a recording (docs/embedding.md)."""
from django.http import Http404


def embed_section(request, section: str):
    raise Http404("embeds are not built yet")


def embed_demo(request):
    raise Http404("embeds are not built yet")
