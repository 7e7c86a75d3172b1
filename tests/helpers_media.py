"""Generated images for the media tests (Pillow): a seeded picture with enough structure for a
PDQ hash of full quality, its copies (resized, recompressed), and bytes in a format."""

from __future__ import annotations

import base64
import functools
import io
import random

from PIL import Image, ImageDraw


def picture(seed: int, size: tuple[int, int] = (320, 240)) -> Image.Image:
    """Shapes of random greys and colours on white: each seed a different, detailed image."""
    rng = random.Random(seed)
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    width, height = size
    for _ in range(60):
        x, y = rng.randrange(width), rng.randrange(height)
        w, h = rng.randint(8, width // 3), rng.randint(8, height // 3)
        colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x, y, x + w, y + h], fill=colour)
    return image


def flat(size: tuple[int, int] = (200, 200), colour=(128, 128, 128)) -> Image.Image:
    """One colour: PDQ quality 0, so it must never match."""
    return Image.new("RGB", size, colour)


def encoded(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def resized_recompressed(image: Image.Image, scale: float = 0.5, quality: int = 60) -> bytes:
    """The copy a re-uploader makes: smaller, and JPEG at a low quality."""
    small = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    return encoded(small, "JPEG", quality=quality)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@functools.cache
def bomb_png(side: int = 10_000, mode: str = "1") -> bytes:
    """A small PNG declaring side x side pixels of one colour (by default 100 megapixels, over
    MEDIA_MAX_PIXELS' 40): a decompression bomb. zlib squeezes the empty canvas about a
    thousandfold: 6300 x 6300 in RGBA (39.7 megapixels, under MEDIA_MAX_PIXELS) is 154 KB."""
    return encoded(Image.new(mode, (side, side)), "PNG", optimize=True)


def bank_publish(name: str, hashes: list[str], *, category: str = "sexual", action: str = "reject",
                 never_display: bool = False):
    """A bank with `hashes` (hex), published in the next policy version: that version."""
    from moderation import services
    from moderation.models import HashBank, HashBankEntry

    bank, _ = HashBank.objects.get_or_create(name=name)
    HashBankEntry.objects.bulk_create([HashBankEntry(bank=bank, pdq=h) for h in hashes], ignore_conflicts=True)
    through = HashBankEntry.objects.filter(bank=bank).order_by("-id").values_list("id", flat=True).first()
    entry = {"name": name, "category": category, "action": action, "never_display": never_display, "through": through}
    return services.policy_publish_change(
        lambda active: {"hash_banks": [*(b for b in active.hash_banks if b["name"] != name), entry]},
        notes=f"bank {name}",
    )


def generous_bounds():
    """Bounds no test image reaches (tests of the bounds set their own)."""
    from moderation.media.images import DecodeBounds

    return DecodeBounds(max_bytes=10**8, max_pixels=10**8, max_decode_bytes=10**10, max_pixels_per_byte=10**6,
                        ratio_from_pixels=10**8)


def image_header(data: bytes):
    """`data`'s header as the API's serializer reads it (a review_submit `image=(data, image_header(data))`)."""
    from moderation.media.images import image_inspect

    return image_inspect(data, bounds=generous_bounds())


def image_hash(data: bytes) -> tuple[str, int]:
    """(PDQ hex, quality) of encoded image bytes, as the job computes them."""
    from moderation.media.images import image_read

    read = image_read(data, bounds=generous_bounds())
    return read.pdq, read.quality
