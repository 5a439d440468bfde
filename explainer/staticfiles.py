"""Static files through WhiteNoise (DEBUG on or off), answered as plain responses so Daphne's async handler
needs no thread to stream them (Django warns on every synchronous file stream under ASGI)."""
from django.http import HttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise with the file read whole: the site's scripts and styles are a few KB each."""

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
        return response
