"""The host page's QR code, as a phone camera reads it (issue 25 point 2): the inline SVG that `/host/` shows for the
students' URL, drawn by Chromium and read by a QR decoder (zxing-cpp), is that URL."""
import base64

from explainer import lan
from tests.conftest import require

DRAW = """async (src) => {
  const img = new Image();
  img.src = src;
  await img.decode();
  const canvas = document.createElement("canvas");
  [canvas.width, canvas.height] = [img.naturalWidth, img.naturalHeight];
  const context = canvas.getContext("2d");
  context.fillStyle = "#fff";
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.drawImage(img, 0, 0);
  const { data } = context.getImageData(0, 0, canvas.width, canvas.height);
  return { width: canvas.width, height: canvas.height, grey: Array.from(data.filter((_, i) => i % 4 === 0)) };
}"""


def test_the_host_pages_qr_code_reads_back_as_the_url(page):
    try:
        import numpy as np
        import zxingcpp
    except ImportError:
        zxingcpp = None
    require(zxingcpp is not None, "zxing-cpp, a QR decoder (requirements-dev.txt)", "make venv")
    for url in ("http://192.168.1.20:8000/", "http://10.0.0.7:8123/"):
        svg = lan.qr_svg(url)  # what host.html puts on the page (explainer/host.py, _class_urls)
        if "xmlns=" not in svg:  # inline in HTML it needs none; as an image file it does
            svg = svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
        drawn = page.evaluate(DRAW, "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode())
        pixels = np.array(drawn["grey"], dtype=np.uint8).reshape(drawn["height"], drawn["width"])
        assert [found.text for found in zxingcpp.read_barcodes(pixels)] == [url]
