"""Prompts as clients send them, for the prompt-compression benchmark (bench/compression.py):
pasted logs, code and documents with trailing whitespace and blank-line runs, a retry loop
that sends the same question again, an agent trace with a long tool output, and two tidy
prompts as controls. Built here, deterministically (no download)."""

from typing import Any

LOG_LINES = [
    f"2026-12-01T10:{m:02d}:{s:02d}Z worker-{m % 3} INFO batch step {m * 60 + s} "
    f"running=12 waiting={s % 5}   "
    for m in range(3)
    for s in range(0, 60, 4)
]
PASTED_LOG = "\n".join(
    line + ("\n\n\n" if index % 7 == 6 else "") for index, line in enumerate(LOG_LINES)
)
PASTED_CODE = (
    "import asyncio   \n\n\n\nclass Pool:   \n    def __init__(self, size: int) -> None:  \n"
    "        self.size = size    \n        self.items: list[int] = []  \n\n\n\n"
    "    async def take(self) -> int:\t\n        while not self.items:   \n"
    "            await asyncio.sleep(0.01)  \n        return self.items.pop()   \n\n\n"
)
DOCUMENT = "\n\n\n".join(
    f"## Section {n}   \n\nThe gateway admits a request once its team's quota holds.   \n"
    f"Each reservation is reconciled to the worker's usage.  \n\n\n"
    for n in range(1, 7)
)
PRETTY_JSON = "\n".join(
    ["{   "]
    + [f'    "field_{n}": {{"value": {n}, "unit": "ms"}},   ' for n in range(30)]
    + ['    "end": true   ', "}   "]
)
CJK = (
    "。  \n".join(["分布式系统中的缓存需要考虑一致性和失效策略", "请用一句话总结"] * 6)
    + "   \n\n\n"
)
TOOL_OUTPUT = "\n".join(f"/srv/app/module_{n:03d}.py: {n * 37 % 997} lines" for n in range(900))


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


CORPUS: dict[str, dict[str, Any]] = {
    "pasted log": {"messages": [_user(f"Why is the queue growing?\n\n{PASTED_LOG}")]},
    "pasted code": {"messages": [_user(f"Review this:\n\n{PASTED_CODE}")]},
    "document": {"messages": [_user(f"{DOCUMENT}\nSummarize the document.")]},
    "pretty JSON": {"messages": [_user(f"What is field_7's unit?\n{PRETTY_JSON}")]},
    "CJK": {"messages": [_user(CJK)]},
    "retry loop": {
        "messages": [
            {"role": "system", "content": "You are a concise assistant."},
            _user("What does a vector database store?"),
            _user("What does a vector database store?"),
            _user("What does a vector database store?"),
        ]
    },
    "agent trace": {
        "messages": [
            _user("Which module is the largest?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "list_files", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": TOOL_OUTPUT},
        ]
    },
    "tidy question": {"messages": [_user("What is the capital of France?")]},
}
# Compression only removes whitespace or repeats here: the model's answer should not move.
MEANING_KEPT = ("pasted log", "pasted code", "document", "pretty JSON", "CJK", "retry loop")
