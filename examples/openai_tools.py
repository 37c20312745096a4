"""An OpenAI chat-completions tool loop over KnowHub's tools.

    KNOWHUB_TOKEN=kh_... OPENAI_API_KEY=sk-... [OPENAI_BASE_URL=...] [OPENAI_MODEL=gpt-4o-mini] \\
        .venv/bin/python -m examples.openai_tools "How do I log in to site A?"
"""
import os
import sys

from openai import OpenAI

from knowhub_client import KnowHub, tools

SYSTEM = "Search KnowHub before answering (knowledge_search); save what you learn (knowledge_save)."


def main(base_url: str, token: str, question: str, *, llm: OpenAI, model: str, max_turns: int = 5) -> str:
    with KnowHub(base_url, token=token) as hub:
        schemas, dispatch = tools(hub)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        for _ in range(max_turns):
            message = llm.chat.completions.create(model=model, messages=messages, tools=schemas).choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": dispatch(call)})
        return "(no answer within the turn limit)"


if __name__ == "__main__":
    answer = main(os.environ.get("KNOWHUB_URL", "http://localhost:8000"), os.environ["KNOWHUB_TOKEN"],
                  " ".join(sys.argv[1:]) or "How do I log in to site A?", llm=OpenAI(),
                  model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    print(answer)
