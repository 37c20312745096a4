"""Hostile document ingestion: another's items replaced by an upload of the same name, zips whose members share a
path, nested lists that cost quadratic time or blow the stack, an oversized upload answered as the README says, a
PDF of a few kilobytes that asks for hours of parsing."""
import contextlib
import io
import signal
import time
import zipfile
import zlib

import pytest
from bs4.element import PageElement, Tag

from ingest import importer
from ingest.chunking import chunk
from ingest.documents import document_run
from ingest.extract import ExtractionError, extract
from ingest.importer import import_file
from ingest.models import Document
from ingest.readers import html, pdf
from jobs.models import Job
from knowledge.models import Knowledge, KnowledgeVersion
from tests.callers import acting, agent_client

pytestmark = pytest.mark.django_db

VICTIM = "# Victim\n\nvictim original content.\n"
ATTACK = "# Victim\n\nATTACKER CONTENT.\n"


def upload(client, name: str, data: bytes, **fields):
    file = io.BytesIO(data)
    file.name = name
    return client.post("/api/documents", {"file": file, **fields}, format="multipart")


def ingest(client, name: str, text: str, scopes: str = "team:a") -> dict:
    """Upload and run the document's job as the worker would; the document as the uploader then sees it."""
    reply = upload(client, name, text.encode(), scopes=scopes)
    assert reply.status_code == 202, reply.content
    document_run(job_id=reply.json()["job"]["id"], worker="test/1/a")
    return client.get(f"/api/documents/{reply.json()['id']}").json()


@pytest.fixture
def owner():
    return agent_client("a_owner", ["team:a"], writable_scopes=["team:a"])


@pytest.fixture
def intruder():
    """Writes team:a, as the owner does, but curates nothing."""
    return agent_client("a_nosec", ["team:a"], writable_scopes=["team:a"])


# --- A: who may read a document again ---

def test_a_writer_who_does_not_own_a_documents_items_cannot_replace_them_by_uploading_the_same_name(owner, intruder):
    first = ingest(owner, "victim2.md", VICTIM)
    (item_id,) = first["items"]
    patched = intruder.patch(f"/api/knowledge/{item_id}", {"content": "x", "reason": "x"}, format="json")
    assert patched.status_code == 403  # the API's rule, which reading the document again now follows
    refused = ingest(intruder, "victim2.md", ATTACK)
    assert refused["status"] == "failed" and refused["items"] == []
    assert "agent:a_owner" in refused["error"] and "curator" in refused["error"]
    assert Job.objects.get(pk=refused["job"]["id"]).status == "failed"
    item = Knowledge.objects.get(pk=item_id)
    assert (item.content, item.status, item.owner) == ("victim original content.", "active", "agent:a_owner")
    assert not KnowledgeVersion.objects.exists() and Knowledge.objects.count() == 1
    gone = ingest(intruder, "victim2.md", "# Other\n\nnothing of the victim's.\n")  # nor archive them
    assert gone["status"] == "failed" and Knowledge.objects.get(pk=item_id).status == "active"


def test_the_owner_and_a_curator_may_read_the_document_again_the_curators_edit_recorded_as_theirs(owner):
    (item_id,) = ingest(owner, "victim2.md", VICTIM)["items"]
    again = ingest(owner, "victim2.md", VICTIM.replace("original", "second"))
    assert again["status"] == "done" and again["outcome"]["updated"] == [item_id]
    curator = agent_client("a_cur", ["team:a"], writable_scopes=["team:a"], can_curate=True)
    third = ingest(curator, "victim2.md", VICTIM.replace("original", "third"))
    assert third["status"] == "done" and third["outcome"]["updated"] == [item_id], third["error"]
    item = Knowledge.objects.get(pk=item_id)
    assert item.content == "victim third content." and item.owner == "agent:a_owner"
    assert item.versions.order_by("-number").first().changed_by == "agent:a_cur"


def test_a_non_curators_upload_cannot_replace_a_curators_imported_items(intruder):
    report = import_file(acting("agent:a_cur"), name="README.md", data=b"# Guide\n\nthe curated steps.\n",
                         scopes=["team:a"])
    (item_id,) = report.knowledge_ids
    refused = ingest(intruder, "README.md", "# Guide\n\nuploaded text.\n")
    assert refused["status"] == "failed" and "agent:a_cur" in refused["error"]
    assert Knowledge.objects.get(pk=item_id).content == "the curated steps."


def test_an_import_by_a_caller_who_may_not_edit_the_items_reports_the_file_and_changes_nothing():
    import_file(acting("agent:first"), name="guide.md", data=b"# Guide\n\nfirst text.\n", scopes=["team:a"])
    report = import_file(acting("agent:second", edits_any=False), name="guide.md", data=b"# Guide\n\nsecond.\n",
                         scopes=["team:a"])
    assert report.imported == 0 and report.failed[0]["line"] == "guide.md"
    assert "agent:first" in report.failed[0]["reason"]
    assert list(Knowledge.objects.values_list("content", flat=True)) == ["first text."]


def zipped(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return out.getvalue()


def test_two_zips_holding_the_same_path_are_two_documents_and_the_same_zip_again_changes_nothing():
    curator = acting("agent:a_cur")
    a = import_file(curator, name="projectA.zip", data=zipped({"README.md": "# Project A\n\nA's install steps.\n"}),
                    scopes=["team:a"])
    b = import_file(curator, name="projectB.zip", data=zipped({"README.md": "# Project B\n\nB's other steps.\n"}),
                    scopes=["team:a"])
    assert (a.imported, b.imported) == (1, 1) and set(a.knowledge_ids).isdisjoint(b.knowledge_ids)
    item = Knowledge.objects.get(pk=a.knowledge_ids[0])
    assert (item.content, item.status) == ("A's install steps.", "active") and not item.versions.exists()
    assert item.source["document"]["uri"] == "projectA.zip/README.md"
    again = import_file(curator, name="projectA.zip", data=zipped({"README.md": "# Project A\n\nA's install steps.\n"}),
                        scopes=["team:a"])
    assert (again.imported, again.skipped, again.knowledge_ids) == (0, 1, a.knowledge_ids)
    assert Knowledge.objects.count() == 2


def test_a_zip_holding_one_path_twice_imports_its_last_copy_once_and_reports_the_earlier_one():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("ops/deploy.md", "# Deploy\n\nthe first copy.\n")
        z.writestr("ops/other.md", "# Other\n\nanother file.\n")
        z.writestr("ops/deploy.md", "# Deploy\n\nthe last copy.\n")
    report = import_file(acting("agent:a_cur"), name="handbook.zip", data=out.getvalue(), scopes=["team:a"])
    assert (report.imported, report.skipped) == (2, 0)
    assert [f["line"] for f in report.failed] == ["ops/deploy.md"] and "last copy" in report.failed[0]["reason"]
    assert sorted(Knowledge.objects.values_list("content", flat=True)) == ["another file.", "the last copy."]


def test_items_a_zip_imported_under_its_bare_member_path_are_taken_over_by_the_same_zip_again(monkeypatch):
    curator, data = acting("agent:a_cur"), zipped({"docs/README.md": "# Project A\n\nA's install steps.\n"})
    with monkeypatch.context() as before:  # as imports named a zip's member before
        before.setattr(importer, "zip_member_uri", lambda archive, member: member)
        old = import_file(curator, name="projectA.zip", data=data, scopes=["team:a"])
    assert Knowledge.objects.get(pk=old.knowledge_ids[0]).source["document"]["uri"] == "docs/README.md"
    again = import_file(curator, name="projectA.zip", data=data, scopes=["team:a"])
    assert (again.imported, again.skipped, again.knowledge_ids) == (0, 1, old.knowledge_ids)
    item = Knowledge.objects.get(pk=old.knowledge_ids[0])
    assert item.source["document"]["uri"] == item.source["name"] == "projectA.zip/docs/README.md"
    changed = import_file(curator, name="projectA.zip", data=zipped({"docs/README.md": "# Project A\n\nnew steps.\n"}),
                          scopes=["team:a"])
    assert changed.updated == 1 and Knowledge.objects.get().content == "new steps."


def test_a_document_uploads_items_are_not_taken_by_a_zip_holding_a_file_of_that_name(owner):
    (uploaded,) = ingest(owner, "README.md", "# Project A\n\nA's install steps.\n")["items"]
    report = import_file(acting("agent:a_cur"), name="projectA.zip",
                         data=zipped({"README.md": "# Project A\n\nA's install steps.\n"}), scopes=["team:a"])
    assert report.imported == 1 and report.knowledge_ids != [uploaded]
    assert Knowledge.objects.get(pk=uploaded).source["document"]["uri"] == "README.md"


# --- B: nested lists in linear time, any depth ---

def tower(depth: int) -> str:
    return "".join(f"<ul><li>item {n}" for n in range(depth)) + "</li></ul>" * depth


def test_a_list_nested_5000_deep_is_read_whole_without_a_recursion_error():
    result = extract(f"<h1>Deep</h1>{tower(5000)}<p>after the list</p>".encode(), "html")
    lines = result.blocks[0].text.splitlines()
    assert [line.strip() for line in lines] == [f"- item {n}" for n in range(5000)]
    assert max(len(line) - len(line.lstrip()) for line in lines) == 2 * html.LIST_DEPTH_MAX
    assert result.blocks[-1].text == "after the list"


def test_a_block_nested_5000_deep_is_read_without_a_recursion_error():
    result = extract(("<div>" * 5000 + "<p>deep text</p>" + "</div>" * 5000).encode(), "html")
    assert [block.text for block in result.blocks] == ["deep text"]


@pytest.fixture
def element_visits(monkeypatch):
    """How many elements BeautifulSoup's iterators hand out (children, descendants, parents): the work done."""
    visits = [0]

    def counting(prop):
        def get(self):
            for element in prop.fget(self):
                visits[0] += 1
                yield element
        return property(get)

    for cls, name in ((Tag, "children"), (Tag, "descendants"), (PageElement, "parents")):
        monkeypatch.setattr(cls, name, counting(getattr(cls, name)))
    return visits


@pytest.mark.parametrize("page", [
    lambda depth: tower(depth),
    lambda depth: "<ol><li>" * depth + "x" + "</li></ol>" * depth,
    lambda depth: "<table><tr><td>" * depth + "x" + "</td></tr></table>" * depth,
    lambda depth: "<table>" + "<tr><td>" * depth + "x" + "</td></tr>" * depth + "</table>",
    lambda depth: "<article>" * depth + "<p>x</p>" + "</article>" * depth,
], ids=["ul", "ol", "tables", "rows in cells", "articles"])
def test_reading_nested_html_looks_at_each_element_a_bounded_number_of_times(element_visits, page):
    def visits(depth: int) -> int:
        element_visits[0] = 0
        html.read(f"<html><body>{page(depth)}</body></html>".encode())
        return element_visits[0]

    small, large = visits(200), visits(400)
    assert large < 2.5 * small  # twice the elements, about twice the work (it was four times: quadratic)
    assert large < 40 * 400


NESTED = ("<h1>Ops</h1><ul><li>check the dashboard<ul><li>error rate</li><li>latency<ol><li>p50</li><li>p99</li>"
          "</ol></li></ul></li><li>page <b>on-call</b></li></ul><ol><li><p>para</p><div><ul><li>in a div</li></ul>"
          "</div> tail</li><li>two<br>lines</li></ol><ul>only text</ul>"
          "<table><caption>Hosts</caption><thead><tr><th>name</th><th>role</th></tr></thead><tbody><tr><td>a1</td>"
          "<td>web <table><tr><td>inner</td></tr></table></td></tr></tbody></table>")


def test_normal_nested_lists_and_tables_read_as_before():
    assert [block.text for block in extract(NESTED.encode(), "html").blocks] == [
        "- check the dashboard\n  - error rate\n  - latency\n    1. p50\n    2. p99\n- page on-call",
        "1. para tail\n  - in a div\n2. two lines",
        "only text",
        "Hosts\nname | role\na1 | web inner",
    ]


def test_a_list_written_directly_in_a_list_keeps_its_text_and_a_row_in_a_cell_is_read_once():
    result = extract(b"<ul><li>a</li><ul><li>b</li></ul></ul><table><tr><td>a<tr><td>b</td></tr></td></tr></table>",
                     "html")
    assert [block.text for block in result.blocks] == ["- a\n  - b", "a b"]


def test_a_deep_list_chunks_into_items_that_keep_every_line():
    pieces = chunk(extract(tower(3000).encode(), "html"), size=1200, overlap=0, fallback_title="deep")
    text = "\n".join(piece.text for piece in pieces)
    assert all(f"- item {n}" in text for n in (0, 1500, 2999))


# --- C: an oversized upload is a 413 ---

def test_an_uploaded_file_over_the_limit_is_413_too_large_naming_the_file(owner, settings):
    settings.KNOWHUB_DOCUMENT_MAX_BYTES = 100
    for reply in (upload(owner, "big.md", b"# Big\n\n" + b"x" * 200, scopes="team:a"),
                  owner.post("/api/documents", {"content": "# Big\n\n" + "x" * 200, "filename": "big.md",
                                                "scopes": ["team:a"]}, format="json")):
        error = reply.json()["error"]
        assert (reply.status_code, error["code"]) == (413, "too_large"), reply.content
        assert "file" in error["fields"] and "100 bytes" in error["message"]
    assert not Document.objects.exists()


def test_a_file_of_exactly_the_limit_is_taken_whole(owner, settings):
    settings.KNOWHUB_DOCUMENT_MAX_BYTES = 100
    data = b"# Fits\n\n" + b"x" * 92
    reply = upload(owner, "fits.md", data, scopes="team:a")
    assert reply.status_code == 202 and bytes(Document.objects.get().data) == data


# --- D: a PDF's parsing is bounded, not only its size ---

def pdf_of(objects: list[bytes]) -> bytes:
    """A PDF of these objects, numbered from 1 (the catalog), with its cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    start = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, start)
    return bytes(out)


def stream(data: bytes, entries: bytes = b"") -> bytes:
    packed = zlib.compress(data, 9)
    return b"<< %s /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (entries, len(packed), packed)


def shared_pdf(pages: int, content: bytes, *, character_map: bytes = b"", form: bytes = b"") -> bytes:
    """`pages` pages that all draw one content stream (3 0 R), with one font (4, its /ToUnicode map 5) and one
    form XObject /X (6): what a 10-kilobyte file can make pypdf parse again for every page."""
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica%s >>" % (
        b" /ToUnicode 5 0 R" if character_map else b"")
    form_entries = b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >>"
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R " \
           b"/Resources << /Font << /F1 4 0 R >> /XObject << /X 6 0 R >> >> >>"
    kids = b" ".join(b"%d 0 R" % (7 + index) for index in range(pages))
    return pdf_of([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
                   stream(content), font, stream(character_map), stream(form, form_entries)] + [page] * pages)


def shows(operators: int) -> bytes:
    """A text object of `operators` empty Tj: no text, ~1 s of pypdf a 200,000."""
    return b"BT /F1 12 Tf\n" + b"() Tj\n" * operators + b"ET\n"


class TookTooLong(BaseException):
    """Not an Exception, so that no `except Exception` in the reader or pypdf swallows it."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail the test (pytest runs it in the main thread) if it is still running after `seconds`."""
    def expire(signum, frame):
        raise TookTooLong

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except TookTooLong:
        pytest.fail(f"still reading the file after {seconds} s: its parsing is not bounded", pytrace=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


HEAVY = {  # each ~20 kB, each minutes of pypdf (hours at 2,000 pages) before the parsing was counted
    "one content stream of 200,000 operators shared by 100 pages": lambda: shared_pdf(100, shows(200_000)),
    "a font with an 80,000-line character map on each of 200 pages": lambda: shared_pdf(
        200, b"BT /F1 12 Tf 72 700 Td (A) Tj ET\n",
        character_map=b"begincmap\n" + (b"100 beginbfchar\n" + b"<41> <0041>\n" * 100 + b"endbfchar\n") * 800
        + b"endcmap\n"),
    "a form of 50,000 operators drawn 5,000 times on one page": lambda: shared_pdf(
        1, b"q\n" + b"/X Do\n" * 5_000 + b"Q\n", form=shows(50_000)),
    "a drawing without text of 4,000,000 T shared by 100 pages, scanned a T at a time": lambda: shared_pdf(
        100, b"T\n" * 4_000_000),
}


@pytest.mark.parametrize("make", HEAVY.values(), ids=HEAVY.keys())
def test_a_small_pdf_asking_for_hours_of_parsing_fails_in_seconds_naming_the_limit(make):
    data = make()
    assert len(data) < 40_000
    started = time.monotonic()
    with deadline(20), pytest.raises(ExtractionError) as raised:
        extract(data, "pdf")
    assert time.monotonic() - started < 10
    assert "too much work to read" in str(raised.value) and f"{pdf.MAX_PARSE_BYTES:,} bytes" in str(raised.value)
    assert raised.value.field == "file"


def test_pages_sharing_a_light_content_stream_and_font_are_all_read():
    data = shared_pdf(1_500, b"BT /F1 12 Tf 72 700 Td (Shared footer text.) Tj ET\n",
                      character_map=b"begincmap\n1 beginbfrange\n<20> <7E> <0020>\nendbfrange\nendcmap\n")
    result = extract(data, "pdf")
    assert [block.text for block in result.blocks] == ["Shared footer text."] * 1_500


def test_pages_whose_text_is_in_a_form_they_draw_are_all_read():
    data = shared_pdf(500, b"q /X Do Q\n", form=b"BT /F1 12 Tf 72 700 Td (Drawn by a form.) Tj ET\n")
    assert [block.text for block in extract(data, "pdf").blocks] == ["Drawn by a form."] * 500


def test_the_parse_limit_is_read_when_the_pdf_is(monkeypatch):
    data = shared_pdf(3, shows(1_000))
    assert extract(data, "pdf").blocks == []
    monkeypatch.setattr(pdf, "MAX_PARSE_BYTES", 10_000)
    with pytest.raises(ExtractionError, match="by page 2 of 3 .* more than 10,000 bytes"):
        extract(data, "pdf")


def test_an_uploaded_pdf_asking_for_hours_of_parsing_fails_its_document_with_the_reason(owner):
    reply = upload(owner, "heavy.pdf", HEAVY["one content stream of 200,000 operators shared by 100 pages"](),
                   scopes="team:a")
    assert reply.status_code == 202, reply.content
    with deadline(20):
        document_run(job_id=reply.json()["job"]["id"], worker="test/1/a")
    document = owner.get(f"/api/documents/{reply.json()['id']}").json()
    assert document["status"] == "failed" and document["items"] == []
    assert "too much work to read" in document["error"] and "split it" in document["error"]
    assert Job.objects.get(pk=reply.json()["job"]["id"]).status == "failed"


def many_styles_docx(styles: int, paragraphs: int) -> bytes:
    """A small DOCX (~150 kB) of `styles` paragraph styles and `paragraphs` paragraphs, half of them in the last
    style: written into python-docx's own template's XML (python-docx itself takes minutes to make it)."""
    import docx

    base, out = io.BytesIO(), io.BytesIO()
    docx.Document().save(base)
    with zipfile.ZipFile(base) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            data = source.read(member.filename)
            if member.filename == "word/styles.xml":
                data = data.replace(b"</w:styles>", "".join(
                    f'<w:style w:type="paragraph" w:customStyle="1" w:styleId="C{n}"><w:name w:val="Custom {n}"/>'
                    f"</w:style>" for n in range(styles)).encode() + b"</w:styles>")
            elif member.filename == "word/document.xml":
                data = data.replace(b"<w:sectPr", "".join(
                    f'<w:p><w:pPr><w:pStyle w:val="{f"C{styles - 1}" if n % 2 else "Heading2"}"/></w:pPr>'
                    f"<w:r><w:t>paragraph {n}</w:t></w:r></w:p>" for n in range(paragraphs)).encode() + b"<w:sectPr", 1)
            target.writestr(member, data)
    return out.getvalue()


def test_a_docx_of_thousands_of_styles_and_paragraphs_is_read_in_time_with_its_headings():
    data = many_styles_docx(6000, 12000)  # each paragraph's style was looked up among every style: ~25-50 s here

    with deadline(10):
        read = extract(data, "docx")

    assert len(read.blocks) == 6000 and read.blocks[0].text == "paragraph 1"
    assert read.blocks[0].headings == ("paragraph 0",)  # Heading 2 still a heading
