"""Static files through WhiteNoise (DEBUG on or off), answered as plain responses so Daphne's async handler
needs no thread to stream them (Django warns on every synchronous file stream under ASGI)."""
import gzip
import re
from functools import lru_cache

from django.http import HttpResponse
from django.utils.cache import patch_vary_headers
from whitenoise.middleware import WhiteNoiseMiddleware

# Text worth compressing; files with a precompressed .gz sibling (the examples) come already encoded.
COMPRESSIBLE = re.compile(r"^(text/|application/(javascript|json)|image/svg)")
ACCEPTS_GZIP = re.compile(r"\bgzip\b")


@lru_cache(maxsize=256)
def gzipped(body: bytes) -> bytes:
    """The body gzipped once per distinct file content (scripts and styles are a few KB each)."""
    return gzip.compress(body, compresslevel=6, mtime=0)


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise with the file read whole, and text gzipped for browsers that accept it (the first paint)."""

    @staticmethod
    def serve(static_file, request):
        streamed = WhiteNoiseMiddleware.serve(static_file, request)
        try:
            response = HttpResponse(b"".join(streamed.streaming_content), status=streamed.status_code)
        finally:
            streamed.close()
        del response["Content-Type"]  # WhiteNoise's own headers say what it is
        for key, value in streamed.items():
            response[key] = value
        return compress(response, request)


def compress(response: HttpResponse, request) -> HttpResponse:
    """Gzip a 200 text response unless it is already encoded; static files hold no secrets, so no BREACH risk."""
    patch_vary_headers(response, ("Accept-Encoding",))
    if (response.status_code != 200 or response.has_header("Content-Encoding") or len(response.content) < 512
            or not COMPRESSIBLE.match(response.get("Content-Type", ""))
            or not ACCEPTS_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", ""))):
        return response
    response.content = gzipped(response.content)
    response["Content-Length"] = str(len(response.content))
    response["Content-Encoding"] = "gzip"
    if response.has_header("ETag") and not response["ETag"].startswith("W/"):
        response["ETag"] = "W/" + response["ETag"]  # another representation of the same file
    return response
