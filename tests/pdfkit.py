"""Test kit: a small PDF writer, so no test PDF is a committed binary.

    pdf = Pdf(title="Rail report", author="Zoë Brandt")
    pdf.page([Text(72, 720, 24, "Rail report"), *paragraph(72, 680, 11, words)])
    pdf.scanned_page()                     # an image, no text layer
    data = pdf.bytes()                     # or pdf.bytes(password="secret", count=100_000)

Text is set in the standard Helvetica fonts with WinAnsiEncoding (so é, ü, ß, €, “ ” and
— are in reach); each `Text` is one line at (x, y) in points from the bottom left of a US
Letter page. Streams are Flate-compressed. `password` encrypts with the standard security
handler (RC4, 40-bit, revision 2: every string and stream, as a reader must decrypt them);
`count` writes a page tree that claims that many pages.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

__all__ = ["Pdf", "Text", "paragraph"]

_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


@dataclass(frozen=True)
class Text:
    """One line of text: position in points, font size, and whether it is bold."""

    x: float
    y: float
    size: float
    text: str
    bold: bool = False


def paragraph(
    x: float, y: float, size: float, words: str, *, width: float = 468, leading: float = 1.35
) -> list[Text]:
    """Set `words` as lines no wider than `width` points (Helvetica's average glyph width)."""
    per_line = max(int(width / (size * 0.5)), 1)
    lines: list[str] = []
    current = ""
    for word in words.split():
        if current and len(current) + 1 + len(word) > per_line:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    if current:
        lines.append(current)
    return [Text(x, y - i * size * leading, size, line) for i, line in enumerate(lines)]


def _rc4(key: bytes, data: bytes) -> bytes:
    state = list(range(256))
    j = 0
    for i in range(256):
        j = (j + state[i] + key[i % len(key)]) % 256
        state[i], state[j] = state[j], state[i]
    out = bytearray()
    i = j = 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + state[i]) % 256
        state[i], state[j] = state[j], state[i]
        out.append(byte ^ state[(state[i] + state[j]) % 256])
    return bytes(out)


def _literal(data: bytes) -> bytes:
    return b"(" + data.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def _info_string(text: str) -> bytes:
    return text.encode("latin-1") if text.isascii() else b"\xfe\xff" + text.encode("utf-16-be")


class Pdf:
    """A PDF document built page by page."""

    def __init__(self, *, title: str = "", author: str = "") -> None:
        self.title = title
        self.author = author
        # (content stream, has the image, already compressed)
        self._pages: list[tuple[bytes, bool, bool]] = []

    def page(self, lines: list[Text]) -> Pdf:
        """Add a page with these lines of text."""
        ops = []
        for line in lines:
            font = "/F2" if line.bold else "/F1"
            text = _literal(line.text.encode("cp1252"))
            ops.append(
                b"BT %s %g Tf %g %g Td %s Tj ET" % (font.encode(), line.size, line.x, line.y, text)
            )
        self._pages.append((b"\n".join(ops), False, False))
        return self

    def compressed_page(self, stream: bytes) -> Pdf:
        """Add a page whose content stream is `stream`, already Flate-compressed."""
        self._pages.append((stream, False, True))
        return self

    def scanned_page(self) -> Pdf:
        """Add a page that is only an image (a scan without a text layer)."""
        self._pages.append((b"q 468 0 0 600 72 100 cm /Im1 Do Q", True, False))
        return self

    def bytes(self, *, password: str | None = None, count: int | None = None) -> bytes:
        """Return the file; encrypted with `password`, or claiming `count` pages."""
        objects: dict[int, tuple[bytes, bytes | None]] = {}  # number → (dictionary, stream)
        objects[1] = (b"<< /Type /Catalog /Pages 2 0 R >>", None)
        objects[3] = (
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
            None,
        )
        objects[4] = (
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold"
            b" /Encoding /WinAnsiEncoding >>",
            None,
        )
        pixels = bytes((x * 7 + y * 3) % 256 for y in range(64) for x in range(64))
        objects[5] = (
            b"<< /Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray"
            b" /BitsPerComponent 8 /Filter /FlateDecode >>",
            zlib.compress(pixels),
        )
        info = []
        if self.title:
            info.append(b"/Title " + _literal(_info_string(self.title)))
        if self.author:
            info.append(b"/Author " + _literal(_info_string(self.author)))
        objects[6] = (b"<< " + b" ".join(info) + b" >>", None)
        kids = []
        number = 7
        for content, image, compressed in self._pages:
            page_number, content_number = number, number + 1
            number += 2
            xobject = b" /XObject << /Im1 5 0 R >>" if image else b""
            objects[page_number] = (
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
                b" /Resources << /Font << /F1 3 0 R /F2 4 0 R >>%s >> >>"
                % (content_number, xobject),
                None,
            )
            stream = content if compressed else zlib.compress(content)
            objects[content_number] = (b"<< /Filter /FlateDecode >>", stream)
            kids.append(b"%d 0 R" % page_number)
        claimed = len(kids) if count is None else count
        objects[2] = (
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), claimed),
            None,
        )
        file_id = hashlib.md5(f"{self.title}{len(self._pages)}".encode()).digest()
        encrypt = b""
        key = b""
        if password is not None:
            key, encrypt_dict = _standard_security(password, file_id)
            objects[number] = (encrypt_dict, None)
            encrypt = b" /Encrypt %d 0 R" % number
            encrypt_number = number
        out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        offsets = {}
        for n in sorted(objects):
            dictionary, stream = objects[n]
            if key and n != encrypt_number:
                dictionary, stream = _encrypted(key, n, dictionary, stream)
            if stream is not None:
                dictionary = dictionary[:-2] + b"/Length %d >>" % len(stream)
            offsets[n] = len(out)
            out += b"%d 0 obj\n" % n + dictionary
            if stream is not None:
                out += b"\nstream\n" + stream + b"\nendstream"
            out += b"\nendobj\n"
        xref = len(out)
        size = max(objects) + 1
        out += b"xref\n0 %d\n0000000000 65535 f \n" % size
        for n in range(1, size):
            out += b"%010d 00000 n \n" % offsets[n]
        out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R /ID [<%s> <%s>]%s >>\n" % (
            size,
            file_id.hex().encode(),
            file_id.hex().encode(),
            encrypt,
        )
        out += b"startxref\n%d\n%%%%EOF\n" % xref
        return bytes(out)


def _standard_security(password: str, file_id: bytes) -> tuple[bytes, bytes]:
    """Return the RC4 key and /Encrypt dictionary for a user password (PDF 1.4, §7.6.3.3)."""
    user = (password.encode("latin-1") + _PAD)[:32]
    owner_key = hashlib.md5(user).digest()[:5]  # the owner password is the user's
    owner = _rc4(owner_key, user)
    permissions = -4  # everything allowed
    digest = hashlib.md5(
        user + owner + permissions.to_bytes(4, "little", signed=True) + file_id
    ).digest()
    key = digest[:5]
    user_entry = _rc4(key, _PAD)
    dictionary = b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P %d >>" % (
        owner.hex().encode(),
        user_entry.hex().encode(),
        permissions,
    )
    return key, dictionary


def _encrypted(
    key: bytes, number: int, dictionary: bytes, stream: bytes | None
) -> tuple[bytes, bytes | None]:
    """Encrypt an object's strings and stream with its own RC4 key."""
    object_key = hashlib.md5(key + number.to_bytes(3, "little") + b"\0\0").digest()[:10]
    if stream is not None:
        return dictionary, _rc4(object_key, stream)
    if b"/Title" in dictionary or b"/Author" in dictionary:
        return _encrypt_strings(object_key, dictionary), None
    return dictionary, None


def _encrypt_strings(object_key: bytes, dictionary: bytes) -> bytes:
    """Re-write every literal string of a simple dictionary as an encrypted hex string."""
    out = bytearray()
    i = 0
    while i < len(dictionary):
        if dictionary[i : i + 1] != b"(":
            out.append(dictionary[i])
            i += 1
            continue
        depth, j, raw = 1, i + 1, bytearray()
        while depth:
            ch = dictionary[j : j + 1]
            if ch == b"\\":
                raw.append(dictionary[j + 1])
                j += 2
                continue
            depth += {b"(": 1, b")": -1}.get(ch, 0)
            if depth:
                raw.append(dictionary[j])
            j += 1
        out += b"<" + _rc4(object_key, bytes(raw)).hex().encode() + b">"
        i = j
    return bytes(out)
