"""Images: bounded decoding, PDQ hashes in ThreatExchange's hex form, and matching against hash
banks (docs/design.md, "Images and hash banks"). Pure functions and an in-memory index; no
database access. (Fetching a `media_url` is moderation/media/fetch.py.)

- **Decoding** is priced before it is done (`image_inspect`, the request's only check): by bytes
  (`MEDIA_MAX_BYTES`, before Pillow sees them), then from the header, before any pixel is
  decoded, by pixels (`MEDIA_MAX_PIXELS`), by the memory the decode would take
  (`MEDIA_DECODE_MAX_BYTES`) and by pixels a byte of the file (`MEDIA_MAX_PIXELS_PER_BYTE`, over
  `MEDIA_RATIO_FROM_PIXELS`): a decompression bomb (a small file declaring a huge canvas) is
  refused unread. The job decodes it once (`image_read`, at most `MEDIA_DECODE_CONCURRENCY` at a
  time in a process, niced by `MEDIA_DECODE_NICE`), checking every pixel (a truncated or forged file is refused then), and
  keeps what the decode gave: the hash and a thumbnail, so nothing decodes it again.
- **Hashing** is PDQ, by `pdqhash` (Python bindings of the reference implementation), with its
  quality (0-100). The hex form is ThreatExchange's (`threatexchange.signal_type.pdq`): the 256
  bits in pdqhash's order, most significant first, so `hex(int(bits, 2))` of its vector, zero
  padded to 64 digits. Hash lists from hash-sharing programs then match bit for bit.
- **Matching** is a linear scan over packed bits: the bank is four columns of uint64 (one per
  64-bit word of the hash), and one query XORs them and counts the set bits
  (`numpy.bitwise_count`), so 1M entries take about a millisecond (bench/media_match.py).
  Hashes under `MIN_QUALITY` never match anything.
- **Bank files** (`bank_file_parse`) are read whole and checked line by line before anything is
  imported: one hash a line (`,label` optional), or a ThreatExchange CSV/TSV export.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import functools
import io
import os
import re
import struct
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from PIL import Image, UnidentifiedImageError

from moderation.models.media import ENTRY_LABEL_MAX

if TYPE_CHECKING:
    import numpy as np

# numpy and pdqhash are imported where they are used: a web worker validates images (Pillow) but
# never hashes or matches them, and need not hold either.

# PDQ's own guidance (ThreatExchange, hashing/pdq/README): hashes of quality under 50 are too
# featureless (flat colours, tiny images) to say anything; they would match one another.
MIN_QUALITY = 50
_HEX = re.compile(r"^[0-9a-fA-F]{64}$")

# What a platform of this kind moderates: the formats browsers show. Pillow is asked to open
# these and no other, so a file of some exotic format (a PSD, an EPS through Ghostscript) is
# refused before any of its code runs.
FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP")
MIME_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp", "BMP": "image/bmp"}


class MediaRefused(ValueError):
    """These bytes are not an image this platform takes; the message says why, for the client."""


# Bytes a pixel takes in memory once Pillow has decoded it, by mode: one for the 1-bit, grey and
# palette modes, two for 16-bit grey, four for every other (RGB included: Pillow keeps it in 32 bits).
_FRAME_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}
_RGB_BYTES = 4


@dataclass(frozen=True)
class ImageHeader:
    """What an image's header declares: read without decoding a pixel."""

    format: str
    width: int
    height: int
    mode: str

    @property
    def mime(self) -> str:
        return MIME_TYPES[self.format]

    @property
    def pixels(self) -> int:
        return self.width * self.height

    @property
    def decode_bytes(self) -> int:
        """The most memory decoding it takes: its frame as Pillow holds it and, for any mode but
        RGB, the full-size RGB copy reduced from (`image_fit`)."""
        per_pixel = _FRAME_BYTES.get(self.mode, _RGB_BYTES) + (0 if self.mode == "RGB" else _RGB_BYTES)
        return self.pixels * per_pixel


@dataclass(frozen=True)
class DecodeBounds:
    """What an image may cost to decode (docs/images.md, "What decoding costs"): the pixels a file
    may declare depend on its size (a bomb declares many pixels in few bytes) and on the memory
    one decode may take; `concurrency` decodes at most run at once in a process."""

    max_bytes: int
    max_pixels: int
    max_decode_bytes: int
    max_pixels_per_byte: int
    ratio_from_pixels: int  # pixels any file may declare, whatever its size
    concurrency: int = 1
    nice: int = 0  # how much lower than the process's the decodes' CPU priority is

    @classmethod
    def from_settings(cls) -> DecodeBounds:
        return cls(max_bytes=settings.MEDIA_MAX_BYTES, max_pixels=settings.MEDIA_MAX_PIXELS,
                   max_decode_bytes=settings.MEDIA_DECODE_MAX_BYTES,
                   max_pixels_per_byte=settings.MEDIA_MAX_PIXELS_PER_BYTE,
                   ratio_from_pixels=settings.MEDIA_RATIO_FROM_PIXELS,
                   concurrency=settings.MEDIA_DECODE_CONCURRENCY, nice=settings.MEDIA_DECODE_NICE)

    def refusal(self, header: ImageHeader, size: int) -> str:
        """Why decoding `header`'s image, `size` bytes long, would cost too much ("" if it would not)."""
        w, h, pixels = header.width, header.height, header.pixels
        if pixels > self.max_pixels:
            return f"the image declares {w}x{h} pixels; at most {self.max_pixels} are decoded"
        if header.decode_bytes > self.max_decode_bytes:
            return (f"the image declares {w}x{h} pixels ({header.mode}), {header.decode_bytes} bytes to decode; "
                    f"at most {self.max_decode_bytes} are spent on one image")
        if pixels > max(self.ratio_from_pixels, size * self.max_pixels_per_byte):
            return (f"the image declares {w}x{h} pixels in {size} bytes ({pixels // size} a byte); over "
                    f"{self.ratio_from_pixels} pixels, at most {self.max_pixels_per_byte} a byte are decoded")
        return ""


def image_inspect(data: bytes, *, bounds: DecodeBounds) -> ImageHeader:
    """The header of `data` (its format, declared size and mode), checked against `bounds` without
    decoding a pixel: MediaRefused, saying why, for bytes that are not an image this platform takes
    or whose decoding would cost more than the bounds allow (a decompression bomb is refused
    unread). A PNG's chunks are checked too, up to its end (their CRCs, nothing inflated), so a
    truncated PNG is refused here; other damage is found by decoding (`image_read`)."""
    if not data:
        raise MediaRefused("the image is empty")
    if len(data) > bounds.max_bytes:
        raise MediaRefused(f"the image is {len(data)} bytes; at most {bounds.max_bytes} are accepted")
    with _refusals():
        with Image.open(io.BytesIO(data), formats=FORMATS) as image:
            header = ImageHeader(format=image.format or "", width=image.width, height=image.height, mode=image.mode)
            if header.width < 1 or header.height < 1:
                raise MediaRefused("the image has no pixels")
            why = bounds.refusal(header, len(data))
            if why:
                raise MediaRefused(f"{why} (a decompression bomb is refused unread)")
            image.verify()
    return header


@dataclass(frozen=True)
class ImageRead:
    """What the one decode of an image gives (`image_read`): its hash, its quality, its thumbnail."""

    header: ImageHeader
    pdq: str
    quality: int
    thumbnail: bytes  # a JPEG, at most THUMBNAIL_SIDE pixels either way


def image_read(data: bytes, *, bounds: DecodeBounds) -> ImageRead:
    """Check `data` (`image_inspect`), then decode it, once, into its PDQ hash and quality and the
    thumbnail the viewer shows: MediaRefused, saying why, otherwise. The decode runs on one of
    the process's `bounds.concurrency` decode threads (the others wait their turn), niced by
    `bounds.nice`: on a machine the web workers share, their requests go first."""
    header = image_inspect(data, bounds=bounds)
    return _decoder(bounds.concurrency, bounds.nice, os.getpid()).submit(_read, data, header).result()


def _read(data: bytes, header: ImageHeader) -> ImageRead:
    with _refusals():
        small = _decoded_small(data)
    pdq, quality = pdq_hash(small)
    return ImageRead(header=header, pdq=pdq, quality=quality, thumbnail=thumbnail_jpeg(small))


def _decoded_small(data: bytes) -> Image.Image:
    """Every pixel of the first frame decoded (a truncated or forged file fails here), reduced at
    once to at most HASH_SIDE pixels either way, in RGB: the full-size frame is let go on return."""
    with Image.open(io.BytesIO(data), formats=FORMATS) as image:
        image.seek(0)  # the first frame of an animation
        if image.format == "JPEG":
            image.draft("RGB", (HASH_SIDE, HASH_SIDE))  # JPEG decodes at 1/2 to 1/8 the size, when larger
        image.load()
        small = image_fit(image)
        return small.copy() if small is image else small  # closing the file closes an image it opened


@functools.cache
def _decoder(concurrency: int, nice: int, pid: int) -> concurrent.futures.ThreadPoolExecutor:
    """The process's decode threads (`pid`: a forked child makes its own; threads do not survive a
    fork), each at `nice` more than the process."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="image-decode",
                                                 initializer=_lower_priority, initargs=(nice,))


def _lower_priority(nice: int) -> None:
    """Nice this thread alone by `nice` (Linux schedules threads, and takes a thread's id where a
    process id goes). Elsewhere it would nice the whole process: left as it is."""
    if nice and sys.platform.startswith("linux"):
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + nice))


@contextlib.contextmanager
def _refusals():
    """Pillow's errors, and its own bomb check, as MediaRefused saying why."""
    try:
        with warnings.catch_warnings():
            # Pillow's own bomb check warns between its limit and twice it; ours is stricter.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except MediaRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaRefused(f"the image is a decompression bomb: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise MediaRefused(f"the bytes are not an image in a supported format ({', '.join(FORMATS)})") from exc
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError, struct.error) as exc:
        raise MediaRefused(f"the image cannot be decoded: {exc}") from exc


# The reference implementation reduces a large image to 512x512 before its Jarosz filters, which
# are slow on large buffers (pdqhash's binding does not, and takes ~28 bytes a pixel to hash):
# the 64x64 the hash is read from is the same picture either way.
HASH_SIDE = 512


def image_fit(image: Image.Image, side: int = HASH_SIDE) -> Image.Image:
    """`image` in RGB, reduced (area averaging) to at most `side` pixels either way; an image as
    small is only converted."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    if max(rgb.size) <= side:
        return rgb
    scale = side / max(rgb.size)
    size = (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale)))
    return rgb.resize(size, Image.Resampling.BOX, reducing_gap=2.0)


def pdq_hash(image: Image.Image) -> tuple[str, int]:
    """(hex, quality) of an image, reduced first (`image_fit`): ThreatExchange's PDQ hex form
    (module docstring)."""
    import numpy as np
    import pdqhash

    vector, quality = pdqhash.compute(np.asarray(image_fit(image), dtype=np.uint8))
    return np.packbits(vector.astype(np.uint8)).tobytes().hex(), int(quality)


THUMBNAIL_SIDE = 96  # px: what a list row shows (blurred and grey) to say "an image", not what it is


def thumbnail_jpeg(image: Image.Image, *, side: int = THUMBNAIL_SIDE) -> bytes:
    """A small JPEG of a decoded image, at most `side` pixels either way."""
    small = image_fit(image, side)
    buffer = io.BytesIO()
    small.save(buffer, "JPEG", quality=70)
    return buffer.getvalue()


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
        import numpy as np

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


# --- bank files -------------------------------------------------------------------------------------

# A ThreatExchange export names its columns; these are the names python-threatexchange's
# `threatexchange dataset -P --csv` writes (signal_type, signal_str, collab, category, tags) and
# the older Graph API's (indicator_type, indicator). PDQ is "pdq" (PdqSignal.get_name()) there
# and "HASH_PDQ" in the Graph API.
_TYPE_COLUMNS = ("signal_type", "indicator_type", "type")
_VALUE_COLUMNS = ("signal_str", "signal_value", "signal", "indicator", "hash")
_LABEL_COLUMNS = ("collab", "category", "label", "labels", "tags")
_PDQ_TYPES = {"pdq", "hash_pdq"}
BANK_FILE_ERRORS_SHOWN = 20


class BankFileInvalid(ValueError):
    """A bank file with bad lines: `errors` names each ("line 7: ..."); nothing may be imported."""

    def __init__(self, errors: list[str], total: int) -> None:
        self.errors, self.total = errors, total
        more = f"\n  … {total - len(errors)} more" if total > len(errors) else ""
        super().__init__(f"{total} bad line{'s' if total != 1 else ''}:\n  " + "\n  ".join(errors) + more)


@dataclass(frozen=True)
class BankFile:
    """A bank file read whole: each hash once (its first label), in file order."""

    format: str  # "plain" (hash[,label] a line) or "threatexchange" (a CSV/TSV export with a header)
    entries: list[tuple[str, str]]  # (hash, label)
    repeated: int  # hashes written more than once in the file (kept once)
    skipped: dict[str, int]  # rows of other signal types in an export, by type


def bank_file_parse(text: str) -> BankFile:
    """Read a bank file: one 64-hex-digit PDQ hash a line, optionally `,label`; or a ThreatExchange
    CSV (or TSV) export, told by its header row, whose PDQ rows are taken and others counted.
    Blank lines and lines starting with `#` are skipped. Every line is checked before anything
    is returned: BankFileInvalid lists the bad ones by number."""
    lines = text.removeprefix("\ufeff").splitlines()
    first = next(((n, line) for n, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")),
                 None)
    if first is not None and _is_header(first[1]):
        return _parse_export(lines, first[0])
    return _parse_plain(lines)


def _is_header(line: str) -> bool:
    cells = {cell.strip().lower() for cell in re.split(r"[,\t]", line)}
    return bool(cells & set(_VALUE_COLUMNS)) and not _HEX.match(line.split(",", 1)[0].strip())


def _parse_plain(lines: list[str]) -> BankFile:
    rows, errors = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        value, _, label = line.partition(",")
        try:
            rows.append((hash_normalize(value), _label(label.strip(), cut=False)))
        except ValueError as exc:
            errors.append(f"line {number}: {exc}")
    return _bank_file("plain", rows, errors, {})


def _parse_export(lines: list[str], header_at: int) -> BankFile:
    delimiter = "\t" if "\t" in lines[header_at] else ","
    reader = csv.reader(lines[header_at:], delimiter=delimiter)
    header = [cell.strip().lower() for cell in next(reader)]
    type_at = next((header.index(c) for c in _TYPE_COLUMNS if c in header), None)
    value_at = next(header.index(c) for c in _VALUE_COLUMNS if c in header)
    label_at = [(c, header.index(c)) for c in _LABEL_COLUMNS if c in header]
    rows, errors, skipped = [], [], {}
    for cells in reader:
        line = header_at + reader.line_num  # the file's line where this row ends (a quoted cell may span lines)
        if not any(cell.strip() for cell in cells) or cells[0].lstrip().startswith("#"):
            continue
        try:
            kind = cells[type_at].strip() if type_at is not None else "pdq"
            if kind.lower() not in _PDQ_TYPES:
                skipped[kind] = skipped.get(kind, 0) + 1
                continue
            label = "; ".join(f"{name}: {cells[at].strip()}" for name, at in label_at if at < len(cells) and cells[at].strip())
            rows.append((hash_normalize(cells[value_at]), _label(label, cut=True)))
        except IndexError:
            errors.append(f"line {line}: {len(cells)} columns, the header has {len(header)}")
        except ValueError as exc:
            errors.append(f"line {line}: {exc}")
    return _bank_file("threatexchange", rows, errors, skipped)


def _label(label: str, *, cut: bool) -> str:
    if "\x00" in label:
        raise ValueError("the label has a NUL character")
    if len(label) > ENTRY_LABEL_MAX:
        if not cut:
            raise ValueError(f"the label is {len(label)} characters; at most {ENTRY_LABEL_MAX}")
        label = label[:ENTRY_LABEL_MAX - 1] + "…"
    return label


def _bank_file(fmt: str, rows: list[tuple[str, str]], errors: list[str], skipped: dict[str, int]) -> BankFile:
    if errors:
        raise BankFileInvalid(errors[:BANK_FILE_ERRORS_SHOWN], len(errors))
    first: dict[str, str] = {}
    for pdq, label in rows:
        first.setdefault(pdq, label)  # a hash written twice keeps its first label
    return BankFile(format=fmt, entries=list(first.items()), repeated=len(rows) - len(first), skipped=skipped)
