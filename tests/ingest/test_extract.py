"""ingest.extract: kinds, titles, blocks and headings of real Markdown, text, HTML, PDF and DOCX inputs."""
import io
import zipfile

import docx
import pytest
from reportlab.lib import pdfencrypt
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Table

from ingest.extract import Block, Extracted, ExtractionError, UnsupportedDocument, extract, kind_of

RUNBOOK = """---
title: front matter title
owner: ops
---
# Deploy runbook

This runbook explains
how the service is deployed.

## Steps

1. Build the image
2. Push it
   to the registry
3. Roll it out

```bash
# not a heading

make deploy ENV=prod
```

Checks
------

| Env | Host |
|-----|------|
| prod | p1 |

## Rollback

Redeploy the previous tag.
"""

CHINESE = """# 部署手册

## 部署

先构建镜像。再推送到仓库。
然后发布到生产环境。

## 回滚

回滚到上一个版本。通知值班工程师。
"""

ARTICLE_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Ops wiki: deploys</title>
<style>body { color: red }</style><script>var tracking = "noise";</script></head>
<body>
<header><a href="/">Ops wiki</a></header>
<nav><ul><li>Home</li><li>Runbooks</li></ul></nav>
<aside>Related: cooking recipes</aside>
<article>
  <h1>Deploy guide</h1>
  <p>Deploys run <b>every</b> weekday
     from <a href="/main">main</a>.</p>
  <h2>Hosts</h2>
  <table><tr><th>Env</th><th>Host</th></tr><tr><td>prod</td><td>p1.example.com</td></tr></table>
  <ul><li>check the dashboard<ul><li>error rate</li></ul></li><li>page on-call</li></ul>
  <pre><code class="language-bash">make deploy
  --env prod
</code></pre>
  <div>Text directly in a div <em>counts</em> too.<p>A paragraph in the div.</p></div>
</article>
<form><input name="q"><button>Search</button></form>
<footer>Copyright 2026 Example Corp</footer>
<script>alert("more noise")</script>
</body></html>
"""


# --- kind_of ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("filename, kind", [
    ("runbook.md", "markdown"), ("notes.MARKDOWN", "markdown"), ("a.txt", "text"), ("b.text", "text"),
    ("page.html", "html"), ("PAGE.HTM", "html"), ("paper.pdf", "pdf"), ("report.docx", "docx"),
    ("dir/sub.dir/file.md", "markdown"),
])
def test_kind_of_reads_the_extension(filename, kind):
    assert kind_of(filename) == kind


@pytest.mark.parametrize("content_type, kind", [
    ("text/markdown", "markdown"), ("text/plain; charset=utf-8", "text"), ("text/html;charset=ISO-8859-1", "html"),
    ("application/xhtml+xml", "html"), ("application/pdf", "pdf"),
    ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"),
])
def test_kind_of_falls_back_to_the_content_type_ignoring_parameters(content_type, kind):
    assert kind_of(None, content_type) == kind
    assert kind_of("download", content_type) == kind


def test_the_extension_wins_over_the_content_type():
    assert kind_of("notes.md", "text/plain") == "markdown"


def test_an_unsupported_type_is_refused_naming_what_was_given_and_what_is_supported():
    with pytest.raises(UnsupportedDocument) as raised:
        kind_of("photo.png", "image/png")
    assert raised.value.field == "file"
    message = str(raised.value)
    assert "photo.png" in message and "image/png" in message
    assert ".md" in message and ".pdf" in message and ".docx" in message
    with pytest.raises(UnsupportedDocument, match="no file name or content type"):
        kind_of(None)


def test_extract_refuses_an_unknown_kind():
    with pytest.raises(UnsupportedDocument, match="png"):
        extract(b"\x89PNG", "png")


# --- Markdown and text ------------------------------------------------------------------------------------

def test_markdown_headings_set_the_path_and_the_first_h1_is_the_title():
    result = extract(RUNBOOK.encode(), "markdown")
    assert result.title == "Deploy runbook"
    assert [(block.headings, block.text) for block in result.blocks] == [
        (("Deploy runbook",), "This runbook explains how the service is deployed."),
        (("Deploy runbook", "Steps"), "1. Build the image\n2. Push it to the registry\n3. Roll it out"),
        (("Deploy runbook", "Steps"), "```bash\n# not a heading\n\nmake deploy ENV=prod\n```"),
        (("Deploy runbook", "Checks"), "Env | Host\nprod | p1"),
        (("Deploy runbook", "Rollback"), "Redeploy the previous tag."),
    ]


def test_markdown_front_matter_is_skipped():
    texts = " ".join(block.text for block in extract(RUNBOOK.encode(), "markdown").blocks)
    assert "front matter" not in texts and "owner" not in texts


def test_a_tilde_fence_and_an_unclosed_fence_stay_whole_code_blocks():
    source = "# Doc\n\n~~~\n## inside\n\n  indented\n~~~\n\ntext\n\n```python\nx = 1\n\n# end"
    blocks = extract(source.encode(), "markdown").blocks
    assert [block.text for block in blocks] == [
        "```\n## inside\n\n  indented\n```", "text", "```python\nx = 1\n\n# end\n```",
    ]
    assert all(block.headings == ("Doc",) for block in blocks)


def test_a_loose_list_with_blank_lines_between_items_stays_one_block():
    blocks = extract(b"- one\n\n- two\n  more of two\n\nAfter the list.", "markdown").blocks
    assert [block.text for block in blocks] == ["- one\n- two more of two", "After the list."]


def test_chinese_markdown_keeps_sentences_and_joins_wrapped_lines_without_spaces():
    result = extract(CHINESE.encode(), "markdown")
    assert result.title == "部署手册"
    assert [(block.headings, block.text) for block in result.blocks] == [
        (("部署手册", "部署"), "先构建镜像。再推送到仓库。然后发布到生产环境。"),
        (("部署手册", "回滚"), "回滚到上一个版本。通知值班工程师。"),
    ]


def test_text_paragraphs_are_split_on_blank_lines_without_headings():
    result = extract(b"# not a heading\nsecond line\n\n\n  Next   paragraph.  \n", "text")
    assert result == Extracted(title="", blocks=[
        Block("# not a heading second line", ()), Block("Next paragraph.", ()),
    ])


@pytest.mark.parametrize("data, text", [
    ("\ufeffutf-8 with BOM: café".encode(), "utf-8 with BOM: café"),
    ("latin-1: café".encode("latin-1"), "latin-1: café"),
    ("naïve élan".encode("latin-1"), "naïve élan"),  # also valid GB18030, but not Chinese-looking
    ("中文：部署和回滚".encode("gb18030"), "中文：部署和回滚"),
    (b"nul\x00 bytes\x00 removed \xff\xfe\xfa", None),
])
def test_text_decoding_never_crashes_and_removes_nul_bytes(data, text):
    (block,) = extract(data, "text").blocks
    assert "\x00" not in block.text
    if text is not None:
        assert block.text == text
    else:
        assert block.text.startswith("nul bytes removed")


def test_blocks_are_never_empty():
    for kind in ("markdown", "text", "html"):
        assert extract(b"\n\n \x00 \n\n", kind).blocks == []
    assert extract(b"# Only a heading\n\n## And another", "markdown").blocks == []


# --- HTML -------------------------------------------------------------------------------------------------

def test_html_keeps_the_article_and_drops_the_noise():
    result = extract(ARTICLE_PAGE.encode(), "html")
    everything = "\n".join(block.text for block in result.blocks)
    for noise in ("tracking", "color", "Ops wiki", "Runbooks", "cooking", "Search", "Copyright", "more noise"):
        assert noise not in everything
    assert result.title == "Deploy guide"
    assert [(block.headings, block.text) for block in result.blocks] == [
        (("Deploy guide",), "Deploys run every weekday from main."),
        (("Deploy guide", "Hosts"), "Env | Host\nprod | p1.example.com"),
        (("Deploy guide", "Hosts"), "- check the dashboard\n  - error rate\n- page on-call"),
        (("Deploy guide", "Hosts"), "```bash\nmake deploy\n  --env prod\n```"),
        (("Deploy guide", "Hosts"), "Text directly in a div counts too."),
        (("Deploy guide", "Hosts"), "A paragraph in the div."),
    ]


def test_html_without_an_h1_takes_the_title_element_and_keeps_div_only_text():
    page = (b"<html><head><title> Status  page </title></head>"
            b"<body><div>All systems <b>up</b>.<div>Since Monday.</div></div></body></html>")
    result = extract(page, "html")
    assert result.title == "Status page"
    assert [block.text for block in result.blocks] == ["All systems up.", "Since Monday."]


def test_html_uses_main_when_there_is_one_and_keeps_definition_lists():
    page = (b"<body><div>outside main</div>"
            b"<main><h2>Glossary</h2><dl><dt>SLO</dt><dd>Service level objective</dd></dl></main></body>")
    result = extract(page, "html")
    assert [(block.headings, block.text) for block in result.blocks] == [
        (("Glossary",), "SLO"), (("Glossary",), "Service level objective"),
    ]


def test_html_falls_back_to_the_meta_charset():
    page = '<html><head><meta charset="windows-1252"></head><body><p>Caf\u00e9 \u201cquoted\u201d</p></body></html>'
    (block,) = extract(page.encode("cp1252"), "html").blocks
    assert block.text == "Caf\u00e9 \u201cquoted\u201d"


# --- PDF --------------------------------------------------------------------------------------------------

def make_pdf(*, title="Deploy runbook", encrypt=None) -> bytes:
    styles = getSampleStyleSheet()
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4, title=title, encrypt=encrypt).build([
        Paragraph("Deploy runbook", styles["Title"]),
        Paragraph("Deploys run from the main branch after the test suite passes. The pipeline builds one image, "
                  "pushes it to the registry and rolls it out to the staging cluster first.", styles["Normal"]),
        Paragraph("Production follows once staging has been healthy for an hour. Watch the error rate dashboard "
                  "while the rollout runs.", styles["Normal"]),
        PageBreak(),
        Paragraph("Rollback", styles["Heading2"]),
        Paragraph("To roll back, redeploy the previous image tag. The database migrations are backwards compatible, "
                  "so no data changes are needed.", styles["Normal"]),
    ])
    return buffer.getvalue()


def test_pdf_paragraphs_pages_and_short_heading_lines():
    result = extract(make_pdf(), "pdf")
    assert result.title == "Deploy runbook"
    assert [(block.headings, block.text) for block in result.blocks] == [
        (("Deploy runbook",), "Deploys run from the main branch after the test suite passes. The pipeline builds one "
                              "image, pushes it to the registry and rolls it out to the staging cluster first."),
        (("Deploy runbook",), "Production follows once staging has been healthy for an hour. Watch the error rate "
                              "dashboard while the rollout runs."),
        (("Rollback",), "To roll back, redeploy the previous image tag. The database migrations are backwards "
                        "compatible, so no data changes are needed."),
    ]


def test_a_pdf_without_a_metadata_title_has_an_empty_title():
    assert extract(make_pdf(title=None), "pdf").title == ""


def test_a_pdf_encrypted_with_only_an_owner_password_is_read():
    encrypted = make_pdf(encrypt=pdfencrypt.StandardEncryption("", ownerPassword="owner-secret"))
    assert extract(encrypted, "pdf").blocks == extract(make_pdf(), "pdf").blocks


def test_a_pdf_that_needs_a_password_is_an_extraction_error():
    with pytest.raises(ExtractionError, match="encrypted with a password") as raised:
        extract(make_pdf(encrypt="user-secret"), "pdf")
    assert raised.value.field == "file"


@pytest.mark.parametrize("cut", [0.5, 0.95])
def test_a_truncated_pdf_is_an_extraction_error(cut):
    data = make_pdf()
    with pytest.raises(ExtractionError, match="PDF cannot be read"):
        extract(data[:int(len(data) * cut)], "pdf")


def make_report(sections: int) -> bytes:
    """A report of `sections` pages, each a heading, four paragraphs and a table."""
    styles = getSampleStyleSheet()
    story = []
    for number in range(1, sections + 1):
        story += [Paragraph(f"Section {number}", styles["Heading2"])]
        story += [Paragraph(f"Finding {number}.{part}: the deploy pipeline builds one image, pushes it to the "
                            "registry and rolls it out to staging, then to production once staging has been "
                            "healthy for an hour.", styles["Normal"]) for part in range(1, 5)]
        story += [Table([["host", "role"], [f"web-{number}", "frontend"]]), PageBreak()]
    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=A4, title="Quarterly report").build(story)
    return buffer.getvalue()


def test_a_long_multi_page_report_is_read_in_full_within_the_parse_limit():
    from ingest.readers import pdf

    finding = ("the deploy pipeline builds one image, pushes it to the registry and rolls it out to staging, then to "
               "production once staging has been healthy for an hour.")
    result = extract(make_report(300), "pdf")
    assert result.title == "Quarterly report"
    assert [(block.headings, block.text) for block in result.blocks] == [
        ((f"Section {number}",), f"Finding {number}.{part}: {finding}"
                                 + (f" host role web-{number} frontend" if part == 4 else ""))
        for number in range(1, 301) for part in range(1, 5)]
    assert pdf.MAX_PARSE_BYTES >= 13_000_000  # a text page counts 4-13 kB: a 1,000-page book must fit


@pytest.mark.parametrize("data", [b"", b"hello, not a PDF", b"%PDF-1.4\n%%EOF"])
def test_bytes_that_are_not_a_pdf_are_an_extraction_error(data):
    with pytest.raises(ExtractionError):
        extract(data, "pdf")


# --- DOCX -------------------------------------------------------------------------------------------------

def make_docx(*, core_title: str = "") -> bytes:
    document = docx.Document()
    document.core_properties.title = core_title
    document.add_paragraph("Deploy runbook", style="Title")
    document.add_heading("Deploy", level=1)
    document.add_paragraph("Deploys run   from main.")
    document.add_heading("Checks", level=2)
    document.add_paragraph("dashboard is green", style="List Bullet")
    document.add_paragraph("error rate is flat", style="List Bullet")
    document.add_paragraph("Before the table.")
    table = document.add_table(rows=2, cols=2)
    for (row, column), text in {(0, 0): "Env", (0, 1): "Host", (1, 0): "prod", (1, 1): "p1"}.items():
        table.cell(row, column).text = text
    document.add_paragraph("After the table.")
    document.add_paragraph("")
    document.add_heading("Rollback", level=1)
    document.add_paragraph("first", style="List Number")
    document.add_paragraph("second", style="List Number")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_docx_headings_lists_and_tables_keep_body_order():
    result = extract(make_docx(), "docx")
    assert result.title == "Deploy runbook"
    assert [(block.headings, block.text) for block in result.blocks] == [
        (("Deploy runbook", "Deploy"), "Deploys run from main."),
        (("Deploy runbook", "Deploy", "Checks"), "- dashboard is green\n- error rate is flat"),
        (("Deploy runbook", "Deploy", "Checks"), "Before the table."),
        (("Deploy runbook", "Deploy", "Checks"), "Env | Host\nprod | p1"),
        (("Deploy runbook", "Deploy", "Checks"), "After the table."),
        (("Deploy runbook", "Rollback"), "1. first\n2. second"),
    ]


def test_the_docx_core_title_comes_first():
    assert extract(make_docx(core_title="Runbook (core)"), "docx").title == "Runbook (core)"


def empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a Word document")
    return buffer.getvalue()


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04 garbage", make_docx()[:2000], empty_zip()],
                         ids=["empty", "garbage", "truncated", "zip-without-docx"])
def test_corrupt_docx_bytes_are_an_extraction_error(data):
    with pytest.raises(ExtractionError, match="not a readable DOCX") as raised:
        extract(data, "docx")
    assert raised.value.field == "file"


def test_a_docx_that_unpacks_far_beyond_its_size_is_refused_unread():
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b" " * (64 * 1024 * 1024))
    with pytest.raises(ExtractionError, match="zip bomb"):
        extract(bomb.getvalue(), "docx")
