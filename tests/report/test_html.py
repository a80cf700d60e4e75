"""report.md -> self-contained report.html (dse/report/html.py), without a browser."""

from pathlib import Path

from dse.report.html import md_to_html, write_report_html

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def test_subset_converts(tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    md = ("# Title *x*\n\nSome **bold** and `code <b>`, a [link](https://e.org).\n\n"
          "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | `x` |\n\n![plot](a.png)\n\n- one\n- two\n\n"
          "```\nraw <tag>\n```\n![gone](missing.png)\n")
    h = md_to_html(md, tmp_path)
    assert "<h1>Title <em>x</em></h1>" in h and "<strong>bold</strong>" in h
    assert "<code>code &lt;b&gt;</code>" in h and '<a href="https://e.org">link</a>' in h
    assert h.count("<tr>") == 3 and "<th>a</th>" in h
    assert 'src="data:image/png;base64,' in h
    assert "<li>one</li>" in h and "raw &lt;tag&gt;" in h
    assert "missing image missing.png" in h


def test_write_report_html_is_deterministic(tmp_path):
    (tmp_path / "p.png").write_bytes(PNG)
    (tmp_path / "report.md").write_text("# s: d\n\n![p](p.png)\n")
    a = write_report_html(tmp_path).read_bytes()
    b = write_report_html(tmp_path).read_bytes()
    assert a == b and b"<title>s: d</title>" in a
    (tmp_path / "nope").mkdir()
    assert write_report_html(tmp_path / "nope") is None
    assert not list(Path(tmp_path).glob(".report.html.tmp-*"))
