"""The lowest layer: settings, errors, the OpenAI message format (chat and Responses items),
memos' own prompt sections, and token counting. Everything else imports from here."""
