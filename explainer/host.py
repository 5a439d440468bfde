"""Workshop mode, the host's side: the password-protected host page and its socket. Placeholder."""
from django.http import Http404


def host_page(request):
    raise Http404("workshop mode is not built yet")
