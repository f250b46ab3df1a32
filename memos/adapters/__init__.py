"""The edges towards the model: memos' tool schemas and their dispatcher, the agent loop,
and the LLM clients (summariser, fact extractor, rule judge). They work against small
protocols, not against :class:`memos.Memory`."""
