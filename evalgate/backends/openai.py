"""The ``openai`` backend: any OpenAI-compatible server (``vllm serve``, ``transformers serve``) over HTTP (httpx).

- Prompts are rendered by evalgate and sent as text to ``/v1/completions`` (default), so the chat template is the
  one evalgate applied, as with ``hf`` and ``vllm``. ``endpoint="chat"`` sends the rendered text as one user
  message to ``/v1/chat/completions`` instead; the server then applies its own chat template on top, so use it
  only with protocols that say ``chat_template: none``.
- One HTTP request per sample, ``n=1`` with that sample's seed, by default (same reason as the vllm backend:
  sample j must depend on its own seed only, so caching and resuming per sample stay exact). ``use_n=True`` asks
  for all of a request's samples in one HTTP request (``n``, seed of the first sample); a server that returns
  fewer choices than asked (``transformers serve`` ignores ``n``) is detected and the missing samples are fetched
  one request each.
- Up to ``concurrency`` requests in flight; 429 and 5xx answers and connection errors/timeouts are retried with
  exponential backoff (``backoff_s * 2**attempt``, or the server's ``Retry-After`` when larger), ``max_retries``
  times; other 4xx answers fail at once with the server's message.
- Text: cut at the first stop sequence as well (OpenAI semantics exclude it; some servers return it).
  ``completion_tokens`` is the server's ``usage.completion_tokens`` for a one-choice answer, else the checkpoint
  tokenizer's count of the text.
- ``top_k`` and ``repetition_penalty`` are not OpenAI fields; they are sent (as vLLM's server accepts them) only
  when the protocol sets them, and a server that ignores them changes the sampling: compare with ``evalgate
  parity``.
"""

from __future__ import annotations

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
    generation_settings,
)
from evalgate.errors import EngineError

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def request_body(prompt: str, params: EffectiveParams, model: str, n: int, seed: int, endpoint: str
                 ) -> dict[str, Any]:
    """The JSON body for one completions (or chat completions) request, from the protocol's values only."""
    body: dict[str, Any] = {"model": model, "max_tokens": params.max_tokens, "temperature": params.temperature,
                            "top_p": params.top_p, "n": n, "seed": int(seed), "stream": False}
    if params.stop:
        body["stop"] = list(params.stop)
    if params.top_k > 0:
        body["top_k"] = params.top_k
    if params.repetition_penalty != 1.0:
        body["repetition_penalty"] = params.repetition_penalty
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
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
        model_dir: the checkpoint directory (its tokenizer counts tokens; the server must serve these weights).
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
        from evalgate.checkpoints import load_tokenizer

        self.options = options
        base_url = options.base_url or os.environ["EVALGATE_OPENAI_BASE_URL"]
        self.model_dir, self.base_url = str(model_dir), base_url.rstrip("/")
        self.model, self.endpoint = options.model or self.model_dir, options.endpoint
        self.concurrency, self.timeout_s = options.concurrency, float(options.timeout_s)
        self.max_retries, self.backoff_s, self.use_n = options.max_retries, float(options.backoff_s), options.use_n
        key = options.api_key or os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(self.model_dir)
        self.stats = {"http_requests": 0, "retries": 0, "short_n_fallbacks": 0}

    def generation_settings(self) -> dict[str, Any]:
        """The settings that change outputs (``base.generation_settings``)."""
        return generation_settings(self.name, self.options)

    def info(self) -> dict[str, Any]:
        return {"engine": "openai-compatible server", "base_url": self.base_url, "model": self.model,
                "endpoint": self.endpoint, "use_n": self.use_n, "httpx": httpx.__version__, **self.stats}

    def _post(self, client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
        path = "/chat/completions" if self.endpoint == "chat" else "/completions"
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
                    raise EngineError(f"server {self.base_url} refused a request ({last}); check the model name "
                                      "and options")
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
        if stopped:
            finish = "stop"
        if finish not in ("stop", "length"):
            raise EngineError(f"server returned finish_reason={finish!r} (expected stop or length)")
        n = usage_tokens if usage_tokens is not None else len(
            self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return Completion(cut, int(n), finish, prompt_tokens)

    def _samples(self, client: httpx.Client, req: GenerationRequest, which: Sequence[int]) -> dict[int, Completion]:
        """Samples ``which`` of one request: one HTTP request with ``n`` (use_n), then one per missing sample."""
        comps: dict[int, Completion] = {}
        if self.use_n and len(which) > 1:
            doc = self._post(client, request_body(req.prompt, req.params, self.model, len(which),
                                                  req.seeds[which[0]], self.endpoint))
            choices = parse_choices(doc, self.endpoint)
            usage = doc.get("usage") or {}
            for j, (text, fr) in zip(which, choices, strict=False):
                comps[j] = self._completion(text, fr, req.params, None, usage.get("prompt_tokens"))
            if len(choices) < len(which):
                self.stats["short_n_fallbacks"] += 1
        for j in which:
            if j in comps:
                continue
            doc = self._post(client, request_body(req.prompt, req.params, self.model, 1, req.seeds[j],
                                                  self.endpoint))
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
            EngineError: the server failed past the retries, refused a request, or answered malformed JSON.
        """
        tasks = [(ri, list(range(len(r.seeds)))) for ri, r in enumerate(requests)] if self.use_n else [
            (ri, [j]) for ri, r in enumerate(requests) for j in range(len(r.seeds))]
        done: dict[int, dict[int, Completion]] = {ri: {} for ri in range(len(requests))}
        results: dict[int, GenerationResult] = {}
        with httpx.Client(timeout=self.timeout_s) as client, ThreadPoolExecutor(self.concurrency) as pool:
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
