"""The ``openai`` backend: any OpenAI-compatible server (``vllm serve``, ``transformers serve``) over HTTP (httpx).

- Prompts are rendered by evalgate and encoded by ``prompts.PromptEncoder`` (one BOS, never two), and the server
  must receive exactly those token ids on ``/v1/completions`` (default), as ``hf`` and ``vllm`` do. The first
  request finds how: the ids as the prompt (vLLM accepts a token-id list); else the text with
  ``add_special_tokens: false`` (vLLM's field; its default true would add a second BOS to a chat template that
  writes one); else, for a server that accepts neither (``transformers serve`` answers 400/422), the plain text
  only where the checkpoint's tokenizer encodes it, with its default special tokens as such a server does, to the
  very same ids; a prompt it would encode otherwise is refused. ``info()["prompt_as"]`` records which.
  ``endpoint="chat"`` sends the rendered text as one user
  message to ``/v1/chat/completions`` instead; the server then applies its own chat template on top, so use it
  only with protocols that say ``chat_template: none``.
- Agentic turns under ``tools.format: openai`` (``GenerationRequest.messages``) go to ``/v1/chat/completions`` as
  the structured conversation with the offered ``tools``; the answer's ``tool_calls`` come back structured
  (``Completion.tool_calls``).
- One HTTP request per sample, ``n=1`` with that sample's seed (same reason as the vllm backend: sample j must
  depend on its own seed only, so caching and resuming per sample stay exact). ``use_n=True`` asks for all of a
  request's samples in one HTTP request (``n``); a server applies one seed to the whole request (vLLM may return
  n copies), so the choices are not the samples of their own seeds: ``use_n`` is refused for sampled protocols
  (temperature > 0) and allowed only for greedy ones, whose output does not depend on the seed. A server that
  returns fewer choices than asked (``transformers serve`` ignores ``n``) is detected and the missing samples
  are fetched one request each.
- Up to ``concurrency`` requests in flight; 429 and 5xx answers and connection errors/timeouts are retried with
  exponential backoff (``backoff_s * 2**attempt``, or the server's ``Retry-After`` when larger), ``max_retries``
  times; other 4xx answers fail at once with the server's message.
- Stop sequences are matched inside the generated text only: the text is cut at the first stop sequence here
  (OpenAI semantics exclude it; some servers return it), and a stop that could match across the prompt/completion
  boundary (a proper prefix of it ends the prompt, e.g. "\\n```" after a prompt ending in a newline) is not sent
  to the server, since ``transformers serve`` matches stops over the prompt's tokens too; for such prompts the
  server generates on and the cut happens here (``stats["stops_held_back"]`` counts them).
  ``completion_tokens`` is the server's ``usage.completion_tokens`` for a one-choice answer, else the checkpoint
  tokenizer's count of the text.
- ``top_k`` and ``repetition_penalty`` are not OpenAI fields; they are sent (as vLLM's server accepts them) only
  when the protocol sets them, and a server that ignores them changes the sampling: compare with ``evalgate
  parity``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import httpx

from evalgate.backends.base import (
    Completion,
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    OpenAIOptions,
    cut_at_stop,
)
from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput, EngineError

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# How a completions prompt reaches the server, in the order tried (see the module docstring).
PROMPT_MODES = ("token_ids", "text, add_special_tokens=false", "text, server tokenization checked equal")


class Refused(EngineError):
    """The server refused a request with a 4xx status other than 429 (``status``: the HTTP status)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def boundary_stops(prompt: str, stop: Sequence[str]) -> list[str]:
    """The stop sequences that could match across the prompt/completion boundary: those a proper prefix of which
    ends ``prompt`` (``"\\n```"`` after a prompt ending in ``"\\n"``)."""
    return [s for s in stop if s and any(prompt.endswith(s[:k]) for k in range(1, len(s)))]


def request_body(prompt: str | Sequence[int], params: EffectiveParams, model: str, n: int, seed: int,
                 endpoint: str, stop: Sequence[str] | None = None, add_special_tokens: bool | None = None
                 ) -> dict[str, Any]:
    """The JSON body for one completions (or chat completions) request, from the protocol's values only.

    Args:
        prompt: rendered text, or token ids (completions only).
        stop: the stop sequences sent to the server (default: the protocol's).
        add_special_tokens: sent as vLLM's field of that name when not None.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": params.max_tokens, "temperature": params.temperature,
                            "top_p": params.top_p, "n": n, "seed": int(seed), "stream": False}
    stop = params.stop if stop is None else stop
    if stop:
        body["stop"] = list(stop)
    if params.top_k > 0:
        body["top_k"] = params.top_k
    if params.repetition_penalty != 1.0:
        body["repetition_penalty"] = params.repetition_penalty
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else list(prompt)
        if add_special_tokens is not None:
            body["add_special_tokens"] = add_special_tokens
    return body


def parse_choices(doc: dict[str, Any], endpoint: str) -> list[tuple[str, str]]:
    """``(text, finish_reason)`` per choice, in ``index`` order.

    Raises:
        EngineError: the answer has no choices list or a choice lacks its text.
    """
    try:
        choices = sorted(doc["choices"], key=lambda c: c.get("index", 0))
        if endpoint == "chat":
            return [(c["message"]["content"] or "", c.get("finish_reason") or "stop") for c in choices]
        return [(c["text"], c.get("finish_reason") or "stop") for c in choices]
    except (KeyError, TypeError) as e:
        raise EngineError(f"server answer is not an OpenAI completion ({e}): {str(doc)[:300]}") from e


class OpenAIBackend:
    """OpenAI-compatible server backend.

    Args:
        model_dir: the checkpoint directory (its tokenizer counts tokens; the server must serve these weights); ""
            with ``endpoint="chat"`` and a ``model`` id: no local copy (a served judge's): the server applies its
            chat template and its ``usage.completion_tokens`` is the count.
        options: validated ``OpenAIOptions`` (base_url, model, endpoint, concurrency, timeout_s, max_retries,
            backoff_s, use_n, api_key; see their docstrings); None: every default. ``base_url`` defaults to
            ``$EVALGATE_OPENAI_BASE_URL``, ``model`` to ``model_dir``, ``api_key`` to ``$OPENAI_API_KEY``.
        tokenizer: the checkpoint's tokenizer if the run already loaded it (``get_backend`` hands it over).

    Raises:
        BadInput: no server URL (neither ``base_url`` nor ``$EVALGATE_OPENAI_BASE_URL``).
    """

    name = "openai"

    def __init__(self, model_dir: str, options: OpenAIOptions | None = None, tokenizer: Any = None):
        options = options or OpenAIOptions()
        options.check_here()
        import threading

        from evalgate.checkpoints.model import load_tokenizer
        from evalgate.protocol.prompts import PromptEncoder

        self.options = options
        base_url = options.base_url or Environment.from_env().openai_base_url or ""
        self.model_dir, self.base_url = str(model_dir), base_url.rstrip("/")
        self.model, self.endpoint = options.model or self.model_dir, options.endpoint
        self.concurrency, self.timeout_s = options.concurrency, float(options.timeout_s)
        self.max_retries, self.backoff_s, self.use_n = options.max_retries, float(options.backoff_s), options.use_n
        key = options.api_key or os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        served_only = not model_dir  # nothing local: the server applies its chat template and counts the tokens
        if served_only and (self.endpoint != "chat" or not options.model):
            raise BadInput("the openai backend needs the served weights' local copy (its tokenizer encodes the prompt) "
                           "unless endpoint is chat, where the server applies its own chat template, and the model "
                           "is named by its served id")
        self.tokenizer = tokenizer if tokenizer is not None or served_only else load_tokenizer(self.model_dir)
        self.encoder = PromptEncoder(self.tokenizer) if self.tokenizer is not None else None
        self.prompt_as: str | None = "chat messages (the server applies its chat template)" if self.endpoint == "chat" \
            else None
        self._mode_lock = threading.Lock()
        self.stats = {"http_requests": 0, "retries": 0, "short_n_fallbacks": 0, "stops_held_back": 0}
        self.served: dict[str, Any] | None = None

    def info(self) -> dict[str, Any]:
        return {"engine": "openai-compatible server", "base_url": self.base_url, "model": self.model,
                "endpoint": self.endpoint, "use_n": self.use_n, "prompt_as": self.prompt_as,
                "stop_matching": "generated text only", "httpx": httpx.__version__, **self.stats,
                **({"served": self.served} if self.served is not None else {})}

    def served_claims(self, client: httpx.Client) -> dict[str, Any]:
        """What the server says it serves (``GET /models``: the entries, at most 8, each cut to 2,000 characters of
        JSON), recorded in the run as ``backend.served`` with ``verified: false``: evalgate cannot check that a
        server serves the weights of the local copy whose identity the run carries. Never raises: an error is
        recorded instead."""
        out: dict[str, Any] = {"verified": False, "source": f"GET {self.base_url}/models (the server's own claim)"}
        try:
            r = client.get(self.base_url + "/models", headers=self._headers)
            data = r.json().get("data") if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as e:
            return {**out, "error": f"{type(e).__name__}: {e}"[:300]}
        if not isinstance(data, list):
            return {**out, "error": f"HTTP {r.status_code}: no model list"}
        entries = [e for e in data if isinstance(e, dict)][:8]
        out["models"] = [e if len(json.dumps(e, default=str)) <= 2000 else {"id": e.get("id"), "cut": True}
                         for e in entries]
        out["named_model_listed"] = any(e.get("id") == self.model for e in entries)
        return out

    def _post(self, client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
        path = "/chat/completions" if self.endpoint == "chat" or "messages" in body else "/completions"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.stats["retries"] += 1
            self.stats["http_requests"] += 1
            try:
                r = client.post(self.base_url + path, json=body, headers=self._headers)
            except (httpx.TransportError, httpx.TimeoutException) as e:
                last, wait = f"{type(e).__name__}: {e}", 0.0
            else:
                if r.status_code == 200:
                    return r.json()
                last = f"HTTP {r.status_code}: {r.text[:300]}"
                if r.status_code not in RETRY_STATUS:
                    raise Refused(f"server {self.base_url} refused a request ({last}); check the model name "
                                  "and options", r.status_code)
                try:
                    wait = float(r.headers.get("retry-after", 0))
                except ValueError:
                    wait = 0.0
            if attempt < self.max_retries:
                time.sleep(max(wait, self.backoff_s * 2 ** attempt))
        raise EngineError(f"server {self.base_url} failed after {self.max_retries} retries ({last}); is it up "
                          "and not overloaded?")

    def _completion(self, text: str, finish: str, params: EffectiveParams, usage_tokens: int | None,
                    prompt_tokens: int | None) -> Completion:
        cut, stopped = cut_at_stop(text, params.stop)
        if stopped:  # cut here: count the tokens up to the stop's end, as an engine that stopped there would
            finish, usage_tokens = "stop", None
            text = text[:len(cut) + max(len(s) for s in params.stop if s and text.startswith(s, len(cut)))]
        if finish not in ("stop", "length"):
            raise EngineError(f"server returned finish_reason={finish!r} (expected stop or length)")
        if usage_tokens is None and self.tokenizer is None:
            raise EngineError(f"server {self.base_url} reported no usage.completion_tokens and no local copy of the "
                              "weights can count them; give the checkpoint (its tokenizer counts)")
        n = usage_tokens if usage_tokens is not None else len(
            self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return Completion(cut, int(n), finish, prompt_tokens)

    def _body(self, req: GenerationRequest, n: int, seed: int, mode: str) -> dict[str, Any]:
        """The request body with the prompt sent in ``mode`` (one of PROMPT_MODES, or chat)."""
        held = boundary_stops(req.prompt, req.params.stop)
        stop = [s for s in req.params.stop if s not in held]
        if self.endpoint == "chat":
            return request_body(req.prompt, req.params, self.model, n, seed, self.endpoint, stop)
        assert self.encoder is not None and self.tokenizer is not None  # only a chat endpoint has no local copy
        ids = list(req.prompt_ids) if req.prompt_ids is not None else list(
            self.encoder.encode(req.prompt, req.key).ids)
        if mode == PROMPT_MODES[0]:
            return request_body(ids, req.params, self.model, n, seed, self.endpoint, stop)
        if mode == PROMPT_MODES[1]:
            return request_body(req.prompt, req.params, self.model, n, seed, self.endpoint, stop, False)
        server_ids = list(self.tokenizer(req.prompt)["input_ids"])
        if server_ids != ids:
            raise EngineError(
                f"server {self.base_url} accepts neither token ids nor add_special_tokens=false, and would encode "
                f"the prompt of item {req.key} as {len(server_ids)} tokens {server_ids[:4]}... instead of the "
                f"{len(ids)} recorded {ids[:4]}... (e.g. a second BOS); serve the checkpoint with vllm serve, or "
                "use --backend hf")
        return request_body(req.prompt, req.params, self.model, n, seed, self.endpoint, stop)

    def _send(self, client: httpx.Client, req: GenerationRequest, n: int, seed: int) -> dict[str, Any]:
        """POST one request; the first one finds how the server takes the prompt (``prompt_as``)."""
        if boundary_stops(req.prompt, req.params.stop):
            self.stats["stops_held_back"] += 1
        if self.prompt_as is not None:
            return self._post(client, self._body(req, n, seed, self.prompt_as))
        with self._mode_lock:
            if self.prompt_as is not None:
                return self._post(client, self._body(req, n, seed, self.prompt_as))
            for mode in PROMPT_MODES:
                try:
                    doc = self._post(client, self._body(req, n, seed, mode))
                except Refused as e:  # a server that rejects this way of sending the prompt says so
                    field = "add_special_tokens" if mode == PROMPT_MODES[1] else "prompt"
                    if e.status in (400, 422) and field in str(e) and mode != PROMPT_MODES[-1]:
                        continue
                    raise
                self.prompt_as = mode
                return doc
        raise AssertionError("unreachable: the last prompt mode returns or raises")

    def _tool_turn(self, client: httpx.Client, req: GenerationRequest, j: int) -> Completion:
        """One agentic turn under ``tools.format: openai``: the conversation (``req.messages``) and the offered
        tools (``req.tools``) sent to ``/chat/completions``; the answer's ``tool_calls`` returned structured (a
        ``tool_calls`` finish_reason counts as ``stop``: the turn ended by calling)."""
        body = request_body("", req.params, self.model, 1, req.seeds[j], "chat")
        body["messages"] = list(req.messages or ())
        if req.tools:
            body["tools"] = list(req.tools)
        doc = self._post(client, body)
        try:
            choice = sorted(doc["choices"], key=lambda c: c.get("index", 0))[0]
            msg = choice["message"]
            calls = tuple({"id": tc.get("id"), "name": tc["function"]["name"],
                           "arguments": tc["function"].get("arguments") or "{}"}
                          for tc in msg.get("tool_calls") or ())
        except (KeyError, TypeError, IndexError) as e:
            raise EngineError(f"server answer is not an OpenAI chat completion ({e}): {str(doc)[:300]}") from e
        finish = choice.get("finish_reason") or "stop"
        usage = doc.get("usage") or {}
        c = self._completion(msg.get("content") or "", "stop" if finish == "tool_calls" else finish, req.params,
                             usage.get("completion_tokens"), usage.get("prompt_tokens"))
        return Completion(c.text, c.completion_tokens, c.finish_reason, c.prompt_tokens, calls)

    def _samples(self, client: httpx.Client, req: GenerationRequest, which: Sequence[int]) -> dict[int, Completion]:
        """Samples ``which`` of one request: one HTTP request with ``n`` (use_n), then one per missing sample."""
        if req.messages is not None:
            return {j: self._tool_turn(client, req, j) for j in which}
        comps: dict[int, Completion] = {}
        if self.use_n and len(which) > 1:
            doc = self._send(client, req, len(which), req.seeds[which[0]])
            choices = parse_choices(doc, self.endpoint)
            usage = doc.get("usage") or {}
            for j, (text, fr) in zip(which, choices, strict=False):
                comps[j] = self._completion(text, fr, req.params, None, usage.get("prompt_tokens"))
            if len(choices) < len(which):
                self.stats["short_n_fallbacks"] += 1
        for j in which:
            if j in comps:
                continue
            doc = self._send(client, req, 1, req.seeds[j])
            choices = parse_choices(doc, self.endpoint)
            if not choices:
                raise EngineError(f"server {self.base_url} returned no choices for item {req.key}")
            usage = doc.get("usage") or {}
            comps[j] = self._completion(choices[0][0], choices[0][1], req.params,
                                        usage.get("completion_tokens") if len(choices) == 1 else None,
                                        usage.get("prompt_tokens"))
        return comps

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        """Generate every sample, ``concurrency`` HTTP requests at a time (one task per sample, or per request
        with ``use_n``); ``on_result`` runs in this thread as each request's samples are complete.

        Raises:
            BadInput: ``use_n`` with a sampled protocol (temperature > 0) and more than one sample per item.
            EngineError: the server failed past the retries, refused a request, or answered malformed JSON.
        """
        sampled = [r.key for r in requests if len(r.seeds) > 1 and r.params.temperature > 0]
        if self.use_n and sampled:
            raise BadInput(f"openai option use_n=true with temperature > 0 (item {sampled[0]}): a server applies one "
                           "seed to all n choices of a request (vLLM may return n copies), so they would be stored "
                           "as the samples of seeds they were not generated with; drop use_n (one request per "
                           "sample, each with its own seed)")
        tasks = [(ri, list(range(len(r.seeds)))) for ri, r in enumerate(requests)] if self.use_n else [
            (ri, [j]) for ri, r in enumerate(requests) for j in range(len(r.seeds))]
        done: dict[int, dict[int, Completion]] = {ri: {} for ri in range(len(requests))}
        results: dict[int, GenerationResult] = {}
        with httpx.Client(timeout=self.timeout_s) as client, ThreadPoolExecutor(self.concurrency) as pool:
            if self.served is None:
                self.served = self.served_claims(client)
            futures = {pool.submit(self._samples, client, requests[ri], which): ri for ri, which in tasks}
            try:
                for fut in as_completed(futures):
                    ri = futures[fut]
                    done[ri].update(fut.result())
                    req = requests[ri]
                    if len(done[ri]) == len(req.seeds):
                        results[ri] = GenerationResult(req, tuple(done[ri][j] for j in range(len(req.seeds))))
                        if on_result:
                            on_result(results[ri])
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        return [results[ri] for ri in sorted(results)]
