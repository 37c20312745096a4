"""An Agno agent whose knowledge base is KnowHub (seed 002's custom retriever, seed 000's filters).

    KNOWHUB_TOKEN=kh_... .venv/bin/python -m examples.agno_agent "site A login"

Without a model it shows what the agent's search tool returns; set OPENAI_API_KEY to let
an OpenAI model drive it (agent.print_response).
"""
import os
import sys

from agno.agent import Agent
from agno.filters import EQ

from knowhub_client import KnowHub, knowhub_retriever


def build_agent(hub: KnowHub, *, agentic: bool, model=None) -> Agent:
    return Agent(
        model=model, knowledge_retriever=knowhub_retriever(hub), search_knowledge=True,
        # static filters (always applied, and winning over the model's), or filters chosen by the model
        knowledge_filters=None if agentic else [EQ("tags.domain", "web")],
        enable_agentic_knowledge_filters=agentic,
        additional_context=hub.build_context(enable_agentic_filters=agentic),
    )


def main(base_url: str, token: str, query: str) -> list:
    with KnowHub(base_url, token=token) as hub:
        agent = build_agent(hub, agentic=False)
        documents = agent.knowledge_retriever(query=query, num_documents=3, filters=agent.knowledge_filters) or []
        for doc in documents:
            print(f"- {doc['name']}: {doc['content']}")
        if os.environ.get("OPENAI_API_KEY"):
            from agno.models.openai import OpenAIChat

            build_agent(hub, agentic=True, model=OpenAIChat(id=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))) \
                .print_response(query)
        return documents


if __name__ == "__main__":
    main(os.environ.get("KNOWHUB_URL", "http://localhost:8000"), os.environ["KNOWHUB_TOKEN"],
         " ".join(sys.argv[1:]) or "site A login")
