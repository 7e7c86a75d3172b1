"""Images: bounded decoding, PDQ hashes in ThreatExchange's hex form, and matching against hash
banks (docs/design.md, "Images and hash banks"). Pure functions and an in-memory index; no
database access. (Fetching a `media_url` is moderation/media_fetch.py.)

- **Decoding** is bounded twice: by bytes (`MEDIA_MAX_BYTES`, before Pillow sees them) and by
  pixels (`MEDIA_MAX_PIXELS`, read from the header before any pixel is decoded), so a
  decompression bomb (a small file declaring a huge canvas) is refused unread. The format is
  then checked by decoding every pixel, not by the header or the file name: a truncated or
  forged file is refused too.
- **Hashing** is PDQ, by `pdqhash` (Python bindings of the reference implementation), with its
  quality (0-100). The hex form is ThreatExchange's (`threatexchange.signal_type.pdq`): the 256
  bits in pdqhash's order, most significant first, so `hex(int(bits, 2))` of its vector, zero
  padded to 64 digits. Hash lists from hash-sharing programs then match bit for bit.
- **Matching** is a linear scan over packed bits: the bank is four columns of uint64 (one per
  64-bit word of the hash), and one query XORs them and counts the set bits
  (`numpy.bitwise_count`), so 1M entries take about a millisecond (bench/media_match.py).
  Hashes under `MIN_QUALITY` never match anything.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PIL import Image, UnidentifiedImageError

if TYPE_CHECKING:
    import numpy as np

# numpy and pdqhash are imported where they are used: a web worker validates images (Pillow) but
# never hashes or matches them, and need not hold either.

# PDQ's own guidance (ThreatExchange, hashing/pdq/README): hashes of quality under 50 are too
# featureless (flat colours, tiny images) to say anything; they would match one another.
MIN_QUALITY = 50
HASH_HEX_DIGITS = 64
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")

# What a platform of this kind moderates: the formats browsers show. Pillow is asked to open
# these and no other, so a file of some exotic format (a PSD, an EPS through Ghostscript) is
# refused before any of its code runs.
FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP")
MIME_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp", "BMP": "image/bmp"}


class MediaRefused(ValueError):
    """These bytes are not an image this platform takes; the message says why, for the client."""


@dataclass(frozen=True)
class DecodedImage:
    format: str
    width: int
    height: int
    image: Image.Image  # fully decoded, RGB

    @property
    def mime(self) -> str:
        return MIME_TYPES[self.format]


def image_decode(data: bytes, *, max_bytes: int, max_pixels: int) -> DecodedImage:
    """Decode `data` as an image, within the bounds; MediaRefused (saying why) otherwise."""
    if not data:
        raise MediaRefused("the image is empty")
    if len(data) > max_bytes:
        raise MediaRefused(f"the image is {len(data)} bytes; at most {max_bytes} are accepted")
    try:
        with warnings.catch_warnings():
            # Pillow's own bomb check warns between its limit and twice it; ours is stricter.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=FORMATS)
            width, height = image.size
            if width < 1 or height < 1:
                raise MediaRefused("the image has no pixels")
            if width * height > max_pixels:
                raise MediaRefused(f"the image declares {width}x{height} pixels; at most {max_pixels} are decoded "
                                   "(a decompression bomb is refused unread)")
            image.seek(0)  # the first frame of an animation
            image.load()  # every pixel: a truncated or forged file fails here, not later
            rgb = image.convert("RGB")
    except MediaRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaRefused(f"the image is a decompression bomb: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise MediaRefused(f"the bytes are not an image in a supported format ({', '.join(FORMATS)})") from exc
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError) as exc:
        raise MediaRefused(f"the image cannot be decoded: {exc}") from exc
    return DecodedImage(format=image.format or "", width=width, height=height, image=rgb)


def pdq_hash(image: Image.Image) -> tuple[str, int]:
    """(hex, quality) of an RGB image: ThreatExchange's PDQ hex form (module docstring)."""
    import numpy as np
    import pdqhash

    vector, quality = pdqhash.compute(np.asarray(image.convert("RGB"), dtype=np.uint8))
    return np.packbits(vector.astype(np.uint8)).tobytes().hex(), int(quality)


def hash_normalize(text: str) -> str:
    """A PDQ hash as written in a bank file or a form: 64 hex digits, lower case; ValueError otherwise."""
    value = text.strip()
    if not _HEX.match(value):
        raise ValueError(f"not a PDQ hash (64 hex digits): {value[:80]!r}")
    return value.lower()


def hash_words(hashes) -> np.ndarray:
    """Hex hashes (or 32-byte values) as an (N, 4) array of big-endian uint64 words."""
    import numpy as np

    raw = b"".join(bytes.fromhex(h) if isinstance(h, str) else bytes(h) for h in hashes)
    return np.frombuffer(raw, dtype=">u8").astype(np.uint64).reshape(-1, 4)


def hamming(a: str, b: str) -> int:
    """Bits that differ between two hex hashes."""
    return (int(a, 16) ^ int(b, 16)).bit_count()


@dataclass(frozen=True)
class BankMatch:
    bank: str
    entry_id: int
    distance: int


class BankIndex:
    """The entries of one or more banks, ready to match: packed hashes, their entry ids and which
    bank each belongs to. Built once per policy version and process (immutable after)."""

    def __init__(self, banks: list[str], bank_of: np.ndarray, entry_ids: np.ndarray, words: np.ndarray) -> None:
        self.banks, self.bank_of, self.entry_ids = banks, bank_of, entry_ids
        # Column-major, (4, N): each of the four 64-bit words of every entry contiguous, so a
        # match streams one word's column at a time instead of summing rows of four, 7x faster
        # at 1M entries (docs/benchmarks.md, "Hash-bank matching").
        self.words = np.ascontiguousarray(words.T)

    @classmethod
    def build(cls, rows_by_bank: dict[str, tuple[list[int], list]]) -> BankIndex:
        """From {bank name: (entry ids, hashes as hex or bytes)}."""
        import numpy as np

        banks = sorted(rows_by_bank)
        ids, words, owner = [], [], []
        for n, bank in enumerate(banks):
            entry_ids, hashes = rows_by_bank[bank]
            if not entry_ids:
                continue
            ids.append(np.asarray(entry_ids, dtype=np.int64))
            words.append(hash_words(hashes))
            owner.append(np.full(len(entry_ids), n, dtype=np.int32))
        if not ids:
            return cls(banks, np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros((0, 4), np.uint64))
        return cls(banks, np.concatenate(owner), np.concatenate(ids), np.concatenate(words))

    def __len__(self) -> int:
        return len(self.entry_ids)

    def match(self, hex_hash: str, *, max_distance: int, quality: int, limit: int = 1000) -> list[BankMatch]:
        """Entries within `max_distance` bits of the hash, nearest first, at most `limit` (none
        for a hash of quality under MIN_QUALITY). The caller drops entries removed since the
        index was built, then keeps each bank's nearest (`nearest_per_bank`)."""
        import numpy as np

        if quality < MIN_QUALITY or not len(self):
            return []
        query = hash_words([hex_hash])[0]
        # The distance over the first two words is a lower bound of the whole: only the entries
        # within max_distance on those 128 bits are finished, and a random hash is ~64 bits away
        # from any entry there, so next to none are. Every buffer is this call's own (the index is
        # shared by the job's threads).
        columns = self.words
        scratch = np.bitwise_xor(columns[0], query[0])
        partial = np.bitwise_count(scratch)  # uint8: at most 64, then 128 below
        np.bitwise_xor(columns[1], query[1], out=scratch)
        partial += np.bitwise_count(scratch)
        hits = np.flatnonzero(partial <= max_distance)
        distances = partial[hits].astype(np.int32)
        for word in (2, 3):
            distances += np.bitwise_count(columns[word][hits] ^ query[word])
        keep = distances <= max_distance
        hits, distances = hits[keep], distances[keep]
        order = np.argsort(distances, kind="stable")[:limit]
        return [BankMatch(self.banks[int(self.bank_of[hits[i]])], int(self.entry_ids[hits[i]]), int(distances[i]))
                for i in order]


def nearest_per_bank(matches: list[BankMatch]) -> list[BankMatch]:
    """Each bank's nearest match (the first, matches being nearest first), ordered by distance."""
    nearest: dict[str, BankMatch] = {}
    for match in matches:
        nearest.setdefault(match.bank, match)
    return sorted(nearest.values(), key=lambda m: (m.distance, m.bank))


THUMBNAIL_SIDE = 96  # px: what a list row shows (blurred and grey) to say "an image", not what it is


def thumbnail_jpeg(image: Image.Image, *, side: int = THUMBNAIL_SIDE) -> bytes:
    """A small JPEG of a decoded image (`image_decode`), at most `side` pixels either way."""
    small = image.convert("RGB")
    small.thumbnail((side, side))
    buffer = io.BytesIO()
    small.save(buffer, "JPEG", quality=70)
    return buffer.getvalue()
