"""Renders the first page of PDF files to PNG images with PDFium (pypdfium2) and Pillow.

Run by crates/rebill-pdf/tests/screenshot.rs as

    python render_pages.py SCALE IN.pdf OUT.png [IN.pdf OUT.png ...]

Each page is rendered at SCALE pixels per point (1.5: 108 dpi), on white, in RGB, and written
to its PNG; one line per image is printed: its path, width and height.
"""

import sys

import pypdfium2


def main(argv):
    scale = float(argv[1])
    pairs = argv[2:]
    if len(pairs) % 2:
        raise SystemExit("usage: render_pages.py SCALE IN.pdf OUT.png [IN.pdf OUT.png ...]")
    for source, target in zip(pairs[0::2], pairs[1::2]):
        document = pypdfium2.PdfDocument(source)
        try:
            image = document[0].render(scale=scale).to_pil().convert("RGB")
            image.save(target, format="PNG")
            print("%s %d %d" % (target, image.width, image.height))
        finally:
            document.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
