"""One self-contained ``report.html`` per study, from the ``report.md`` its writer made:
plots inline as base64 PNG, tables inline, no file or network reference outside it (to
take into an architecture review as one file).

The converter handles the Markdown subset the study writers emit (dse/report/*.py):
ATX headings, paragraphs, pipe tables, images, fenced code, bullet lists, and inline
``code``, **bold**, *italics* and [links](url).  It is small on purpose: no third-party
Markdown dependency.  Output is deterministic (same ``report.md`` and PNGs -> same bytes).
"""

from __future__ import annotations

import base64
import html
import mimetypes
import re
from pathlib import Path

from dse.report.atomic import write_text

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; line-height: 1.45; color: #222; }
h1, h2, h3 { line-height: 1.2; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.88em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; display: block; margin: 1em 0; border: 1px solid #eee; }
code { background: #f4f4f4; padding: 0 3px; border-radius: 3px; font-size: 0.92em; }
pre { background: #f4f4f4; padding: .8em; overflow-x: auto; }
pre code { background: none; padding: 0; }
.missing { color: #b00; font-weight: bold; }
"""

_IMG = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITAL = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")


def _data_uri(path: Path) -> str | None:
    if not path.is_file():
        return None
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _inline(text: str, base: Path) -> str:
    """Inline Markdown of one line/cell -> HTML (code spans are protected first)."""
    spans: list[str] = []

    def keep(s: str) -> str:
        spans.append(s)
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), text)

    def img(m):
        alt, src = m.group(1), m.group(2)
        uri = _data_uri(base / src) if not re.match(r"^[a-z]+:", src) else None
        if uri is None:
            return keep(f'<span class="missing">[missing image {html.escape(src)}]</span>')
        return keep(f'<img alt="{html.escape(alt)}" src="{uri}">')

    text = _IMG.sub(img, text)
    text = _LINK.sub(lambda m: keep(f'<a href="{html.escape(m.group(2))}">{html.escape(m.group(1))}</a>'), text)
    text = html.escape(text, quote=False)
    text = _BOLD.sub(r"<strong>\1</strong>", text)
    text = _ITAL.sub(r"<em>\1</em>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: spans[int(m.group(1))], text)


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def _is_rule(line: str) -> bool:
    return bool(re.fullmatch(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?", line.strip()))


def md_to_html(md: str, base: Path = Path(".")) -> str:
    """The body HTML of ``md``; images are read from ``base`` and inlined."""
    lines = md.splitlines()
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush():
        if para:
            out.append("<p>" + " ".join(_inline(p, base) for p in para) + "</p>")
            para.clear()

    while i < len(lines):
        ln = lines[i]
        st = ln.strip()
        if st.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append("<pre><code>" + html.escape("\n".join(lines[i + 1:j])) + "</code></pre>")
            i = j + 1
            continue
        m = re.match(r"^(#{1,6})\s+(.*)$", st)
        if m:
            flush()
            n = len(m.group(1))
            out.append(f"<h{n}>{_inline(m.group(2).strip(), base)}</h{n}>")
            i += 1
            continue
        if st.startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            flush()
            head = _cells(st)
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].strip().startswith("|"):
                rows.append(_cells(lines[j]))
                j += 1
            t = ["<table>", "<thead><tr>" + "".join(f"<th>{_inline(c, base)}</th>" for c in head)
                 + "</tr></thead>", "<tbody>"]
            for r in rows:
                t.append("<tr>" + "".join(f"<td>{_inline(c, base)}</td>" for c in r) + "</tr>")
            t += ["</tbody>", "</table>"]
            out.append("\n".join(t))
            i = j
            continue
        if re.match(r"^[-*]\s+", st):
            flush()
            items = []
            while i < len(lines) and re.match(r"^\s*[-*]\s+", lines[i]):
                item = re.sub(r"^\s*[-*]\s+", "", lines[i])
                i += 1
                while i < len(lines) and lines[i].startswith("  ") and lines[i].strip() \
                        and not re.match(r"^\s*[-*]\s+", lines[i]):
                    item += " " + lines[i].strip()
                    i += 1
                items.append(f"<li>{_inline(item, base)}</li>")
            out.append("<ul>\n" + "\n".join(items) + "\n</ul>")
            continue
        if not st:
            flush()
        else:
            para.append(st)
        i += 1
    flush()
    return "\n".join(out)


def render(md: str, base: Path, title: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + md_to_html(md, base) + "\n</body>\n</html>\n")


def write_report_html(out_dir, md_name: str = "report.md") -> Path | None:
    """``out_dir/report.html`` from ``out_dir/report.md`` (atomically); None if no report."""
    out_dir = Path(out_dir)
    md_path = out_dir / md_name
    if not md_path.is_file():
        return None
    md = md_path.read_text()
    m = re.search(r"^#\s+(.*)$", md, flags=re.M)
    title = m.group(1).strip() if m else out_dir.name
    return write_text(out_dir / "report.html", render(md, out_dir, title))
