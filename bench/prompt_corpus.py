"""Chat requests of every kind of content, for checking prompt token counts against the
worker's own (the test and `manage.py bench_prompt_tokens`): English, code, JSON, CJK,
multi-turn conversations, content parts, tool definitions and tool calls."""

import json
from typing import Any

CODE = '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

class Cache(dict):
    def __missing__(self, key):
        value = self[key] = fib(key)
        return value
'''
JSON_DOC = json.dumps(
    {
        "order": {"id": "A-1029", "items": [{"sku": "X-1", "qty": 2, "price": 9.99}] * 5},
        "customer": {"name": "Ana María", "tags": ["vip", "eu"], "notes": None},
    },
    indent=2,
    ensure_ascii=False,
)
CJK = "東京は日本の首都です。人口は約千四百万人で、世界有数の大都市です。天気はどうですか。"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                "required": ["city"],
            },
        },
    }
]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


CORPUS: dict[str, dict[str, Any]] = {
    "english, one question": {"messages": [user("What is the capital of France?")]},
    "english, system prompt": {
        "messages": [
            {"role": "system", "content": "You are a terse assistant. Answer in one line."},
            user("Explain what a load balancer does, in plain words, for a new engineer."),
        ]
    },
    "english, long": {"messages": [user("Summarise this. " + "The quick brown fox jumps. " * 120)]},
    "code": {"messages": [user("Review this Python:\n" + CODE)]},
    "json": {"messages": [user("Extract the customer's name:\n" + JSON_DOC)]},
    "cjk": {"messages": [user(CJK * 3)]},
    "multi-turn": {
        "messages": [
            user("Hi! Can you help me plan a trip?"),
            {"role": "assistant", "content": "Of course. Where would you like to go?"},
            user("Lisbon, for four days in May, on a budget."),
            {"role": "assistant", "content": "Great choice. Day 1: Alfama and the castle..."},
            user("And what should I eat?"),
        ]
    },
    "content parts": {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Translate to German:"},
                    {"type": "text", "text": "The meeting moved to Thursday at 10."},
                ],
            }
        ]
    },
    "tools and a tool call": {
        "messages": [
            user("What's the weather in Porto?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Porto"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 19, "sky": "clear"}'},
        ],
        "tools": TOOLS,
    },
}
