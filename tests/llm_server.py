"""A real HTTP server on 127.0.0.1 that speaks OpenAI's /v1/chat/completions and
/v1/responses, for tests.

Replies are deterministic:
- a memos summary request ("[memos:summarize]") gets bullet lines made from the
  messages it was given (``drop_pattern`` removes matching text, to test the safety net);
- a ``record_facts`` request gets ADD operations for the identifiers in the new messages;
- an agent request with the memory tools gets a ``retrieve`` call (``memory_retrieve`` and the
  like when the tools are prefixed) when the user asks
  "what was ..." or "remind me ...", and after a tool result a reply quoting it;
  anything else is echoed.

Faults are injected per request: ``faults`` is a queue consumed first ("429", "500",
"malformed", "slow", "context_length"); then ``fail_rate`` draws 429s and 500s at random
(seeded). Every request body is kept in ``requests``. ``system_first_only`` answers 400 to a
chat request with a system (or developer) message anywhere but first, as a server does
whose model's chat template takes one system message only.

Like the API, it answers 400 to a chat request holding a tool message that does not answer
a call of the assistant message right before its run of tool messages, or an assistant
message whose tool calls are not all answered by the tool messages right after it
(:func:`chat_orphans`, written apart from memos' own check).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ID = re.compile(r"\b[A-Z]{2,}-\d+\b|\b\d{1,5} [A-Z][a-z]+ (?:Street|Road|Avenue)\b")


class FakeOpenAI:
    """The server and its knobs; use as a context manager."""

    def __init__(self, *, fail_rate: float = 0.0, seed: int = 0, retry_after: float = 0.0, slow_s: float = 2.0) -> None:
        self.fail_rate = fail_rate
        self.rng = random.Random(seed)
        self.retry_after = retry_after
        self.slow_s = slow_s
        self.faults: deque[str] = deque()
        self.drop_pattern: str | None = None
        self.hold: threading.Event | None = None  # when set up, summary replies wait until it is set
        self.fact_ops: list[dict[str, Any]] | None = None  # record_facts operations to answer instead
        self.rule_kinds: dict[str, str] = {}  # judge_rules: sentence -> kind (others are 'none')
        self.system_first_only = False
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give the openai client."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- replies -------------------------------------------------------------------

    def _fault(self) -> str | None:
        with self.lock:
            if self.faults:
                return self.faults.popleft()
            if self.fail_rate and self.rng.random() < self.fail_rate:
                return self.rng.choice(["429", "500"])
        return None

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages", [])
        tools = {t["function"]["name"] for t in body.get("tools") or [] if "function" in t}
        customs = sorted(t["custom"]["name"] for t in body.get("tools") or [] if t.get("type") == "custom")
        system = str(messages[0].get("content", "")) if messages else ""
        last = messages[-1] if messages else {}
        if system.startswith("[memos:answer]"):  # an extractive "model": the line most like the question
            words = set(re.findall(r"\w{4,}", str(last.get("content", "")).lower()))
            lines = [ln for m in messages[1:-1] for ln in str(m.get("content") or "").splitlines() if ln.strip()]
            best = max(lines, key=lambda ln: len(words & set(re.findall(r"\w{4,}", ln.lower()))), default="not mentioned")
            return _message({"role": "assistant", "content": best[:300]})
        if system.startswith("[memos:judge]"):
            gold = re.search(r"Gold answer: (.*)\nModel answer: (.*)", str(last.get("content", "")), re.S)
            ok = bool(gold) and gold.group(1).strip().lower() in gold.group(2).lower()  # type: ignore[union-attr]
            return _message({"role": "assistant", "content": "CORRECT" if ok else "WRONG"})
        if system.startswith("[memos:summarize]"):
            if self.hold is not None:
                self.hold.wait(timeout=30)
            material = str(last.get("content", ""))
            lines = []
            for ln in material.splitlines():
                m = re.match(r"#\d+ (\w+): (.*)", ln)
                if m and m.group(2).strip():
                    lines.append(f"- {m.group(1)}: {m.group(2)[:160]}")
                elif ln.startswith("- "):
                    lines.append(ln)
            text = "\n".join(lines[-40:]) or "- nothing to keep"
            if self.drop_pattern:
                text = re.sub(self.drop_pattern, "the order", text)
            return _message({"role": "assistant", "content": text})
        if "judge_rules" in tools:
            numbered = re.findall(r"^(\d+)\. (.*)$", str(last.get("content", "")), re.M)
            judged = [{"index": int(i), "kind": self.rule_kinds.get(text.strip(), "none")} for i, text in numbered]
            return _message({"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_rules", "type": "function",
                 "function": {"name": "judge_rules", "arguments": json.dumps({"judgements": judged})}}]})
        if "record_facts" in tools:
            material = str(last.get("content", "")).split("New messages:", 1)[-1]
            ops = self.fact_ops if self.fact_ops is not None else [
                {"op": "ADD", "kind": "identifier", "key": i, "value": i, "fact_id": None, "source_seq": None}
                for i in dict.fromkeys(ID.findall(material))]
            return _message({"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_facts", "type": "function",
                 "function": {"name": "record_facts", "arguments": json.dumps({"operations": ops})}}]})
        if customs and last.get("role") == "user" and "patch" in str(last.get("content", "")):
            return _message({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_c{len(self.requests)}", "type": "custom",
                 "custom": {"name": customs[0], "input": "*** Begin Patch\n+ print('hi')\n*** End Patch"}}]})
        if last.get("role") == "tool":
            try:
                results = json.loads(last.get("content") or "{}").get("results", [])
            except ValueError:
                results = []
            found = results[0]["text"] if results else "nothing"
            return _message({"role": "assistant", "content": f"From memory: {found}"})
        user_text = str(last.get("content", ""))
        if re.search(r"\bgraded essay\b", user_text, re.I):  # what a model refuses: no content, a refusal
            return _message({"role": "assistant", "content": None, "refusal": "I can't write graded work for you."})
        retrieve = next((t for t in sorted(tools) if t.endswith("retrieve")), None)  # memos' tool, maybe prefixed
        if retrieve and re.search(r"\b(what was|remind me)\b", user_text, re.I):
            n = len(self.requests)
            args = {"query": user_text, "top_k": 3, "since": None, "until": None, "kind": None, "page": None}
            return _message({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_r{n}", "type": "function", "function": {"name": retrieve, "arguments": json.dumps(args)}}]})
        return _message({"role": "assistant", "content": f"OK: {user_text[:200]}"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                with server.lock:
                    server.statuses.append(status)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(body)
                responses = self.path.endswith("/responses")
                if not responses and not self.path.endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": {"message": "not found"}}).encode())
                    return
                fault = server._fault()
                if fault == "429":
                    self._send(429, _error("Rate limit reached", "rate_limit_exceeded"),
                               {"Retry-After": str(server.retry_after)})
                    return
                if fault == "500":
                    self._send(500, _error("The server had an error", "server_error"))
                    return
                if fault == "context_length":
                    self._send(400, _error("This model's maximum context length is 8192 tokens", "context_length_exceeded"))
                    return
                if fault == "malformed":
                    self._send(200, b'{"id": "x", "choices": [ {"message": ')
                    return
                if fault == "slow":
                    time.sleep(server.slow_s)
                if responses:
                    try:
                        chat = chat_request(body)
                    except ValueError as exc:
                        self._send(400, _error(str(exc), "invalid_request_error"))
                        return
                    self._send(200, json.dumps(_response(server.reply(chat))).encode())
                    return
                orphan = chat_orphans(body.get("messages") or [])
                if orphan is not None:
                    self._send(400, _error(orphan, "invalid_request_error"))
                    return
                later = [i for i, m in enumerate(body.get("messages") or []) if i and m.get("role") in ("system", "developer")]
                if server.system_first_only and later:
                    self._send(400, _error(f"messages[{later[0]}]: a system message is accepted only as the first message "
                                           "by this model's chat template", "invalid_request_error"))
                    return
                self._send(200, json.dumps(server.reply(body)).encode())

        return Handler


def chat_orphans(messages: list[dict[str, Any]]) -> str | None:
    """What the chat completions API says of a tool message without its call or a call
    without its result (the first one), or ``None`` when every call is answered right after
    it and every tool message answers one."""
    waiting: list[str] = []  # the calls of the assistant message this run of tool messages follows
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in waiting:
                return (f"Invalid parameter: messages[{i}]: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.")
            waiting.remove(m["tool_call_id"])
            continue
        if waiting:
            break
        waiting = [c.get("id") for c in m.get("tool_calls") or []] if m.get("role") == "assistant" else []
    if waiting:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(waiting)}")
    return None


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """A /v1/responses request read as the chat request ``reply`` answers; raises
    ``ValueError`` where the Responses API answers 400: a call output with no call before
    it, a call with no output after it, an item it does not know."""
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
    outputs = [i["call_id"] for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")]
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    seen: set[str] = set()
    for item in items:
        kind = item.get("type", "message")
        if kind in ("function_call", "custom_tool_call"):
            if item["call_id"] not in outputs:
                raise ValueError(f"No tool output found for function call {item['call_id']}.")
            seen.add(item["call_id"])
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments", "")}}
            if messages and messages[-1].get("role") == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if item["call_id"] not in seen:
                raise ValueError(f"No tool call found for function call output with call_id {item['call_id']}.")
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        elif kind == "reasoning":
            continue
        elif kind == "message":
            content = item["content"]
            if isinstance(content, list):
                for part in content:
                    if part.get("type") not in ("input_text", "output_text", "input_image", "input_file", "refusal"):
                        raise ValueError(f"Invalid content part type {part.get('type')!r}.")
                content = "".join(p.get("text", "") for p in content)
            messages.append({"role": item["role"], "content": content})
        else:
            raise ValueError(f"Invalid input item type {kind!r}.")
    tools = [{"type": t["type"], t["type"]: {k: v for k, v in t.items() if k != "type"}} for t in body.get("tools") or []]
    return {"model": body.get("model"), "messages": messages, "tools": tools}


def _response(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat completion's message as a Responses API response: a reasoning item, then the
    message and function calls."""
    message = chat["choices"][0]["message"]
    output: list[dict[str, Any]] = [{"type": "reasoning", "id": "rs_test", "summary": []}]
    if message.get("content") or message.get("refusal"):
        part = ({"type": "output_text", "text": message["content"], "annotations": []} if message.get("content")
                else {"type": "refusal", "refusal": message["refusal"]})
        output.append({"type": "message", "id": "msg_test", "role": "assistant", "status": "completed", "content": [part]})
    for call in message.get("tool_calls") or []:
        output.append({"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"],
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"], "status": "completed"})
    return {"id": "resp_test", "object": "response", "created_at": int(time.time()), "model": "test-model",
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def _error(message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}}).encode()


def _message(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": "test-model",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


if __name__ == "__main__":  # run it by hand: python tests/llm_server.py
    with FakeOpenAI() as srv:
        print(srv.url, flush=True)
        threading.Event().wait()
