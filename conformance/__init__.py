"""The conformance check against OpenAI's OpenAPI description (README.md beside this file)."""
