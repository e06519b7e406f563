"""OpenAI tool calls: formats per template family, prompts, forced-call grammar, parsing."""
