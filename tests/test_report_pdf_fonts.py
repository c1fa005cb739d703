"""The PDF's embedded font, subset once per process (mpvlab/reporting/pdf_fonts.py, issue 36): the PDFs
still embed TrueType (Type 42: Type 0 / CIDFontType2 with FontFile2) fonts, never Type 3, and every
glyph a figure's text uses is in the embedded font with the original's outline; the text read back
from the PDF (content stream → ToUnicode) is the figure's and the same as matplotlib's own path gives.
No PDF library is installed here: the PDF is parsed with zlib and fontTools (matplotlib writes one
object per `N 0 obj … endobj`, streams Flate-compressed)."""

from __future__ import annotations

import io
import re
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from fontTools.ttLib import TTFont  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from mpvlab.reporting import pdf_fonts  # noqa: E402
from mpvlab.reporting import style as st  # noqa: E402
from mpvlab.reporting.figure import render  # noqa: E402
from mpvlab.reporting.output import Output  # noqa: E402

TITLE = "Buffer fill — µs · Δ ≤ 5 (offline)"      # ASCII, superset symbols, ligatures "ff", "fl", "fi"
XLABEL = "café naïve"                              # é, ï: outside the superset (added to the subset)
LIGATURES = {"ff": 0xFB00, "fi": 0xFB01, "fl": 0xFB02, "ffi": 0xFB03, "ffl": 0xFB04}


def _objects(pdf: bytes) -> dict[int, bytes]:
    return {int(m.group(1)): m.group(2) for m in re.finditer(rb"(\d+) 0 obj\n?(.*?)endobj", pdf, re.S)}


def _stream(body: bytes) -> bytes:
    raw = body.split(b"stream\n", 1)[1].rsplit(b"endstream", 1)[0]
    return zlib.decompress(raw) if b"/FlateDecode" in body.split(b"stream", 1)[0] else raw


def _ref(body: bytes, key: bytes) -> int:
    m = re.search(rb"/" + key + rb" (\d+) 0 R", body)
    assert m, f"/{key.decode()} missing in {body[:200]!r}"
    return int(m.group(1))


def _to_unicode(cmap: bytes) -> dict[int, str]:
    out: dict[int, str] = {}
    for block in re.findall(rb"beginbfrange\n(.*?)endbfrange", cmap, re.S):
        for lo, hi, dst in re.findall(rb"<([0-9a-f]+)> <([0-9a-f]+)> \[(.*?)\]", block):
            for code, u in zip(range(int(lo, 16), int(hi, 16) + 1), re.findall(rb"<([0-9a-f]+)>", dst)):
                out[code] = bytes.fromhex(u.decode()).decode("utf-16-be")
    for block in re.findall(rb"beginbfchar\n(.*?)endbfchar", cmap, re.S):
        for code, u in re.findall(rb"<([0-9a-f]+)> <([0-9a-f]+)>", block):
            out[int(code, 16)] = bytes.fromhex(u.decode()).decode("utf-16-be")
    return out


def _literal(s: bytes) -> bytes:
    """A PDF literal string's bytes (between the parentheses), its escapes undone."""
    out, i = bytearray(), 0
    esc = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("b"): b"\b", ord("f"): b"\f"}
    while i < len(s):
        if s[i] == 0x5C:                                    # backslash
            i += 1
            if s[i] in esc:
                out += esc[s[i]]
            elif 0x30 <= s[i] <= 0x37:
                j = i
                while j < min(i + 3, len(s)) and 0x30 <= s[j] <= 0x37:
                    j += 1
                out.append(int(s[i:j], 8))
                i = j - 1
            else:
                out.append(s[i])
        else:
            out.append(s[i])
        i += 1
    return bytes(out)


def _read(pdf: bytes) -> tuple[str, list[tuple[TTFont, dict[int, str], list[int]]]]:
    """The PDF's text (every string shown, decoded by its font's ToUnicode) and, per font, the
    embedded TrueType font, its ToUnicode map and its CIDToGIDMap. Asserts the fonts are Type 0 /
    CIDFontType2 with an embedded FontFile2, and that there is no Type 3 font."""
    objs = _objects(pdf)
    assert not any(b"/Subtype /Type3" in b for b in objs.values()), "a Type 3 font in the PDF"
    page = next(b for b in objs.values() if b"/Type /Page " in b or b"/Type /Page\n" in b)
    resources = objs[_ref(page, b"Resources")]
    fonts_dict = objs[_ref(resources, b"Font")]
    fonts: dict[bytes, tuple[TTFont, dict[int, str], list[int]]] = {}
    for name, num in re.findall(rb"/(\w+) (\d+) 0 R", fonts_dict):
        type0 = objs[int(num)]
        assert b"/Subtype /Type0" in type0 and b"/Encoding /Identity-H" in type0, type0
        cid = objs[int(re.search(rb"/DescendantFonts \[ (\d+) 0 R", type0).group(1))]  # type: ignore[union-attr]
        assert b"/Subtype /CIDFontType2" in cid, cid                  # TrueType outlines: Type 42
        descriptor = objs[_ref(cid, b"FontDescriptor")]
        embedded = TTFont(io.BytesIO(_stream(objs[_ref(descriptor, b"FontFile2")])))
        gidmap = _stream(objs[_ref(cid, b"CIDToGIDMap")])
        cid_to_gid = [int.from_bytes(gidmap[i:i + 2], "big") for i in range(0, len(gidmap), 2)]
        fonts[name] = (embedded, _to_unicode(_stream(objs[_ref(type0, b"ToUnicode")])), cid_to_gid)
    text = []
    content = _stream(objs[_ref(page, b"Contents")])
    for bt in re.findall(rb"BT\n(.*?)ET", content, re.S):
        to_unicode: dict[int, str] = {}
        # font selections and strings, in the order shown (a line of text may switch fonts)
        for m in re.finditer(rb"/(\w+) [\d.]+ Tf|\(((?:\\.|[^\\)])*)\)", bt, re.S):
            if m.group(1) is not None:
                to_unicode = fonts[m.group(1)][1]
                continue
            b = _literal(m.group(2))
            text.append("".join(to_unicode[int.from_bytes(b[i:i + 2], "big")] for i in range(0, len(b), 2)))
        text.append("\n")
    return "".join(text), list(fonts.values())


def _figure() -> plt.Figure:
    with matplotlib.rc_context(st.RC):
        fig, ax = plt.subplots(figsize=(st.COLUMN_W, 2.0), layout="constrained")
        ax.plot([0, 1, 2], [3, 1, 2], label="offline fluff")
        ax.set_title(TITLE)
        ax.set_xlabel(XLABEL)
        ax.legend()
    return fig


def test_the_pinned_matplotlib_still_has_the_function_replaced() -> None:
    # a matplotlib without it writes PDFs by its own path (slower): this test says so on an upgrade
    assert pdf_fonts.available(), "matplotlib changed _backend_pdf_ps.get_glyphs_subset: see pdf_fonts.py"


def test_pdf_embeds_truetype_fonts_drawing_every_glyph_used_and_the_same_text() -> None:
    pdf_fonts.prepare()
    misses = pdf_fonts._subset.cache_info().misses
    ours = [render(_figure(), Output(("svg", "pdf")))["pdf"] for _ in range(2)]
    # two figures, the same text beyond the superset (é, ï): one more subset, reused by the second
    assert pdf_fonts._subset.cache_info().misses == misses + 1
    assert ours[0] == ours[1]
    fig = _figure()
    with matplotlib.rc_context(st.RC):
        buf = io.BytesIO()
        fig.savefig(buf, format="pdf", metadata={"CreationDate": None})    # matplotlib's own subsetting
    plt.close(fig)
    theirs_text, _ = _read(buf.getvalue())
    text, fonts = _read(ours[0])
    assert TITLE in text and XLABEL in text and "offline fluff" in text, text
    assert text == theirs_text
    original = TTFont(font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans")))
    cmap, glyf = original.getBestCmap(), original["glyf"]
    used = 0
    for embedded, to_unicode, cid_to_gid in fonts:
        order = embedded.getGlyphOrder()
        for code, chars in to_unicode.items():
            # the glyph the text draws (code → gid in the embedded font) is the one the original font
            # has for those characters (a ligature: the glyph named by them, e.g. "fi")
            want = cmap[ord(chars) if len(chars) == 1 else LIGATURES[chars]]
            got = order[cid_to_gid[code]]
            assert got == want, (chars, got, want)
            a, b = embedded["glyf"][got], glyf[want]
            assert a.numberOfContours == b.numberOfContours
            if a.numberOfContours:
                assert list(a.getCoordinates(embedded["glyf"])[0]) == list(b.getCoordinates(glyf)[0]), chars
            used += 1
    assert used >= len(set(TITLE + XLABEL)) - 3          # ligatures replace f, i, l in some places
