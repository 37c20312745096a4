"""Demo data for the browser tests and the README screenshots, made through the real services."""
from datetime import timedelta

from django.utils import timezone

from agents.services import agent_token_create
from jobs.models import Job
from knowledge import feedback, services, slim
from knowledge.models import Conflict, FeedbackCase
from knowledge.search.indexing import embed_items
from tests.factories import make_knowledge, make_resource
from tests.callers import acting

ITEMS = [
    ("Log in to site A with Selenium", "Use undetected_chromedriver to avoid bot detection; add random 1-3 s delays between actions.",
     ["tool", "strategy"], {"domain": "scraping"}, 4),
    ("Selenium login for site A", "undetected_chromedriver avoids the bot check; pause randomly between steps.",
     ["tool"], {"domain": "scraping"}, 3),
    ("User prefers tabs", "The user wants tabs for indentation and type hints in Python code.", ["user_profile"],
     {"domain": "coding_style"}, 5),
    ("Reconcile invoices", "Export the ledger as CSV and match invoice numbers; flag amounts that differ by more than 1 %.",
     ["usecase"], {"domain": "finance"}, 4),
    ("Retry flaky HTTP calls", "Retry 429 and 5xx with exponential backoff (0.5, 1, 2 s), never retry 4xx.", ["strategy"],
     {"domain": "http"}, 2),
    ("Scrape site B with requests", "Reuse the exported cookies in a requests.Session and rotate proxies.", ["tool"],
     {"domain": "scraping"}, 3),
    ("Retry HTTP calls that fail", "Retry every failed request, 4xx included, three times without waiting.", ["strategy"],
     {"domain": "http"}, 3),
]


def make_demo() -> dict:
    now = timezone.now()
    secret = make_resource("credentials/site_a", title="Site A test account", content_type="credential",
                           body="Log in at https://a.example.com/login", secure_body="user=bot pass=DEMO-SECRET-123",
                           expires_at=now + timedelta(days=3))
    items = []
    for task, content, types, tags, score in ITEMS:
        extra = {"resource_ids": [secret.id]} if task.startswith("Log in") else {}
        items.append(make_knowledge(task=task, content=content, types=types, tags=tags, score=score, embed=False, **extra))
    embed_items(items=items)
    for day, (item, helpful) in enumerate([(0, True), (0, True), (2, False), (3, True), (4, True), (4, False),
                                           (0, True), (2, False), (3, True), (1, True)] * 2):
        feedback.feedback_record(acting("agent:research_agent"), knowledge_id=items[item].id, helpful=helpful, case={"note": "demo report"})
    for n, case in enumerate(FeedbackCase.objects.order_by("id")):
        FeedbackCase.objects.filter(pk=case.pk).update(created_at=now - timedelta(days=(n * 3) % 27))
    services.knowledge_edit(acting("user:carl"), knowledge_id=items[0].id, reason="clearer delays",
                            content=items[0].content + " Log in once per session.")
    proposal = Job.objects.create(kind="slim", status="succeeded", requested_by="user:carl",
                                  params={"dry_run": True, "model": "demo", "writable_scopes": None},
                                  result={"groups": [{"ids": sorted([items[0].id, items[1].id]), "proposal": {
                                      "task": "Log in to site A with Selenium",
                                      "content": "Use undetected_chromedriver and pause randomly (1-3 s) between steps."}}]})
    slim.store_proposal(proposal.result["groups"][0]["ids"], proposal.result["groups"][0]["proposal"], job_id=proposal.id)
    first, second = sorted([items[4].id, items[6].id])  # the two retry items give opposite advice
    Conflict.objects.create(first_id=first, second_id=second, kind="contradiction", detected_for=items[6].id,
                            model="demo", similarity=0.83, explanation=(
                                "One never retries 4xx and backs off exponentially; the other retries 4xx at once, "
                                "three times: following one means not following the other."))
    token, _ = agent_token_create(agent_id="research_agent", readable_scopes=["org:acme"])
    return {"items": items, "secret": secret, "proposal": proposal, "token": token}
