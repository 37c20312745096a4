"""KnowHub from Python in a few lines: save, search with filters, give feedback, goal focus.

    KNOWHUB_URL=http://localhost:8000 KNOWHUB_TOKEN=kh_... .venv/bin/python -m examples.client_quickstart
"""
import os

from knowhub_client import EQ, IN, KnowHub


def main(base_url: str, token: str) -> dict:
    with KnowHub(base_url, token=token) as hub:
        saved = hub.knowledge_save(
            task="Log in to site A and export orders",
            content="Use the shared test account; at most 100 logins a day; sessions last two hours.",
            types=["tool", "usecase"], tags={"domain": "web"}, score=4,
        )
        found = hub.knowledge_search("site A login", top_k=3, filters=EQ("tags.domain", "web") & ~IN("types", ["plan"]))
        hub.knowledge_update(saved["id"], add_helpful_case={"task": "export orders", "outcome": "成功"})
        block = hub.focus_goal_knowledge("Export this month's orders from site A")
        print(block)
        return {"saved": saved, "found": found, "focus": block}


if __name__ == "__main__":
    main(os.environ.get("KNOWHUB_URL", "http://localhost:8000"), os.environ["KNOWHUB_TOKEN"])
