"""The README's hash-bank example image (docs/examples/known-bad.png), drawn with Pillow: no
downloaded picture. Stands in for a known harmful image; its PDQ hash is the README's bank line.

    .venv/bin/python -m lab.example_image   # draws it again (the same pixels)
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

PATH = Path(__file__).resolve().parent.parent / "docs" / "examples" / "known-bad.png"
SIDE = 128


def draw() -> Image.Image:
    """Bands, rings and a diagonal: enough structure for a PDQ hash of full quality."""
    image = Image.new("RGB", (SIDE, SIDE), (250, 250, 245))
    pen = ImageDraw.Draw(image)
    for i in range(0, SIDE, 16):
        pen.rectangle([i, 0, i + 7, SIDE // 2], fill=(30 + i, 60, 200 - i))
    for r in range(8, SIDE // 2, 10):
        pen.ellipse([SIDE // 2 - r, SIDE // 2 - r + 20, SIDE // 2 + r, SIDE // 2 + r + 20], outline=(200, 40, 40), width=3)
    pen.line([0, SIDE - 1, SIDE - 1, 0], fill=(20, 20, 20), width=6)
    return image


def main() -> None:
    PATH.parent.mkdir(parents=True, exist_ok=True)
    draw().save(PATH, "PNG", optimize=True)
    print(PATH)


if __name__ == "__main__":
    main()
