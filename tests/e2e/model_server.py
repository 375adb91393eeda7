"""A scripted model API on 127.0.0.1 for the real agent CLIs (no model is ever called).

It speaks just enough of three wire formats for one agent turn each:

- OpenAI Responses (`POST /v1/responses`, SSE) for Codex: `custom_tool_call` apply_patch,
  or `function_call` exec_command for a shell heredoc;
- Anthropic Messages (`POST /v1/messages`, SSE) for Claude Code: `tool_use` Write;
- Gemini `:streamGenerateContent` (SSE) for Gemini CLI: `functionCall` write_file.

The script is a JSON list of steps, each `{"tool": NAME, "input": {...}}` (`*SUFFIX` names
the offered tool ending so, for MCP tools the client prefixes). The server
answers step N to a request that already carries N tool results, and plain text once the
script is done; side requests (no tools offered) get text too. Every request and the
tool results it carried are appended to a JSON-lines log, so a test can read what the
agent was told (the guard's reason, for one).

    python model_server.py --script steps.json --log requests.jsonl   # prints "port N"
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

USAGE = {"input_tokens": 1, "output_tokens": 1}


class Script:
    def __init__(self, steps: list[dict[str, Any]], log: Path) -> None:
        self.steps = steps
        self.log = log
        self.lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock, self.log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def step(self, done: int, offered: list[str]) -> dict[str, Any] | None:
        """Step `done`; a tool named `*SUFFIX` is the offered tool whose name ends so (MCP
        tools get a client-chosen prefix)."""
        if done >= len(self.steps):
            return None
        step = dict(self.steps[done])
        if step["tool"].startswith("*"):
            names = [n for n in offered if n.endswith(step["tool"][1:])]
            step["tool"] = names[0] if names else step["tool"][1:]
        return step


def offered(tools: object) -> list[str]:
    """Tool names a request offers, in any of the three formats (nested ones too)."""
    names: list[str] = []
    if isinstance(tools, list):
        for tool in tools:
            if isinstance(tool, dict):
                if isinstance(tool.get("name"), str):
                    names.append(tool["name"])
                for key in ("functionDeclarations", "tools"):
                    names += offered(tool.get(key))
    return names


def sse(events: list[dict[str, Any]], *, named: bool) -> bytes:
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out).encode()


def codex_reply(body: dict[str, Any], script: Script) -> tuple[bytes, list[str]]:
    items = [i for i in body.get("input", []) if isinstance(i, dict)]
    results = [
        str(i.get("output"))
        for i in items
        if i.get("type") in ("function_call_output", "custom_tool_call_output")
    ]
    step = script.step(len(results), offered(body.get("tools")))
    call_id = f"call_{len(results) + 1}"
    if step is None:
        item: dict[str, Any] = {
            "type": "message", "role": "assistant", "id": "msg_done",
            "content": [{"type": "output_text", "text": "done"}],
        }  # fmt: skip
    elif step["tool"] == "apply_patch":
        item = {
            "type": "custom_tool_call",
            "name": "apply_patch",
            "input": step["input"]["patch"],
            "call_id": call_id,
        }
    else:
        shell = step["tool"] == "exec_command"
        arguments = {"cmd": step["input"]["command"]} if shell else step["input"]
        item = {
            "type": "function_call",
            "name": step["tool"],
            "arguments": json.dumps(arguments),
            "call_id": call_id,
        }
    usage = {"input_tokens": 1, "input_tokens_details": None, "output_tokens": 1,
             "output_tokens_details": None, "total_tokens": 2}  # fmt: skip
    events = [
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.output_item.done", "item": item},
        {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}},
    ]
    return sse(events, named=True), results


def claude_reply(body: dict[str, Any], script: Script) -> tuple[bytes, list[str]]:
    results = [
        json.dumps(block.get("content"))
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    tools = offered(body.get("tools"))
    step = script.step(len(results), tools) if "Write" in tools else None
    model = body.get("model", "claude")
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": USAGE}}  # fmt: skip
    if step is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": "done"}
        stop = "end_turn"
    else:
        block = {
            "type": "tool_use",
            "id": f"toolu_{len(results) + 1:02d}",
            "name": step["tool"],
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step["input"])}
        stop = "tool_use"
    events: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]  # fmt: skip
    if not body.get("stream"):
        doc = {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
               "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
               "stop_sequence": None, "usage": USAGE}  # fmt: skip
        return json.dumps(doc).encode(), results
    return sse(events, named=True), results


def gemini_reply(body: dict[str, Any], script: Script) -> tuple[bytes, list[str]]:
    results = [
        json.dumps(part["functionResponse"])
        for content in body.get("contents", [])
        for part in content.get("parts", [])
        if isinstance(part, dict) and "functionResponse" in part
    ]
    step = script.step(len(results), offered(body.get("tools"))) if body.get("tools") else None
    if step is None:
        parts: list[dict[str, Any]] = [{"text": "done"}]
    else:
        parts = [{"functionCall": {"name": step["tool"], "args": step["input"]}}]
    doc = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    }  # fmt: skip
    return f"data: {json.dumps(doc)}\n\n".encode(), results


def handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            return

        def send(self, status: int, data: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            script.record({"method": "GET", "path": self.path})
            if self.path.split("?")[0].endswith("/models"):
                self.send(200, b'{"object": "list", "data": [], "models": []}', "application/json")
            else:
                self.send(404, b"{}", "application/json")

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            path = self.path.split("?")[0]
            if path.endswith("/responses"):
                data, results = codex_reply(body, script)
            elif path.endswith("/messages"):
                data, results = claude_reply(body, script)
            elif ":streamGenerateContent" in path or ":generateContent" in path:
                data, results = gemini_reply(body, script)
            elif path.endswith(":countTokens"):
                self.send(200, b'{"totalTokens": 1}', "application/json")
                return
            else:
                script.record({"method": "POST", "path": self.path, "unknown": True})
                self.send(404, b'{"error": "unknown path"}', "application/json")
                return
            tools = offered(body.get("tools"))
            script.record({"method": "POST", "path": self.path, "results": results, "tools": tools})
            streaming = data.startswith((b"event:", b"data:"))
            self.send(200, data, "text/event-stream" if streaming else "application/json")

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    script = Script(json.loads(args.script.read_text()), args.log)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(script))
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
