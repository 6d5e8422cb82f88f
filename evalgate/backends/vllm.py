"""The ``vllm`` backend: vLLM's offline ``LLM`` engine in this process, every request queued in it at once.

Decisions (and why):

- **One engine request per sample**, each ``SamplingParams(n=1, seed=<that sample's seed>)``. vLLM takes one seed
  per ``SamplingParams``; with ``n > 1`` the n samples share that seed's generator, so sample j's text would depend
  on how many samples were pending together. evalgate caches and resumes per sample (key: item, sample index,
  seed), so sample j must be a function of its own seed only, as with ``hf``. This costs no prefill: vLLM's
  automatic prefix caching (on by default in the V1 engine) shares the prompt's KV blocks across the n requests,
  and V1 itself runs ``n > 1`` as n child requests.
- **Sampling values only from the protocol**: the engine is created with ``generation_config="vllm"`` (vLLM's
  ``ModelConfig.generation_config``: "auto", the default, loads the checkpoint's ``generation_config.json`` as
  default sampling values and its ``max_new_tokens`` as a server-wide cap; "vllm" loads none), and every
  ``SamplingParams`` field evalgate relies on is set explicitly (``sampling_params_kwargs``).
- **Prompts rendered and tokenized by evalgate**: each prompt goes in as ``TokensPrompt(prompt_token_ids=...)``
  with the request's ``prompt_ids`` (``prompts.PromptEncoder``: one BOS, never two), so the engine sees exactly
  the tokens ``hf`` sees.
- **Data parallel** (``data_parallel_size > 1``): vLLM 0.33 refuses ``LLM(data_parallel_size>1)`` in one process,
  so evalgate starts that many worker processes, each owning ``tensor_parallel_size`` GPUs
  (``CUDA_VISIBLE_DEVICES``) and an independent engine, and deals the sample requests out round-robin. Samples
  depend only on their own seeds, so sharding does not change any output.
- **Results as they finish**: every request is queued at once, as ``LLM.generate`` does, and the engine is
  stepped the way ``LLM.generate`` steps it (``stream_engine``), but each request's completion is handed back as
  soon as it finishes, so the run stores it at once and a killed run resumes from what was stored. Data-parallel
  workers send their results when they finish.

- **Log-likelihoods** (``loglikelihood``): each (context, continuation) row goes in whole as a token prompt with
  ``SamplingParams(max_tokens=1, prompt_logprobs=1)``; vLLM returns, per prompt position, the log-probability of the
  prompt's token there (from the raw logits) and its rank, so a continuation's log-likelihood is the sum over its
  tokens and it is greedy when every rank is 1. The first row of each context goes first, then the others reading
  the prefix cache (``prompt_logprob_rows``: whole blocks of a context are computed once, as ``hf`` computes a
  context once); in this process only (with ``data_parallel_size`` > 1 it is refused).

The translations protocol -> engine arguments (``engine_kwargs``, ``sampling_params_kwargs``) and engine output
-> evalgate completion (``completion_from_output``) are plain functions, tested against vLLM's real classes.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# vLLM logs to stdout unless told otherwise (vllm.envs: VLLM_LOGGING_STREAM, default "ext://sys.stdout"), in this
# process and in its engine core's, which reads the same environment; evalgate's stdout carries results (--json),
# so vLLM's log goes to stderr unless the user chose a stream. It must be set before vllm is imported (vllm.logger
# configures itself then); the CLI's --json also points file descriptor 1 at stderr (commands.json_stdout).
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")

# An ImportError here becomes an install hint for the vllm extra in the registry. Only the light classes are imported
# at module level (the contract tests need no GPU stack); vllm.LLM is imported when a VLLMBackend is constructed.
import vllm  # noqa: E402,I001
from vllm import SamplingParams  # noqa: E402
from vllm.inputs import TokensPrompt  # noqa: E402

from evalgate.backends.base import (
    Completion,
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    VLLMOptions,
    engine_builds,
)
from evalgate.core.errors import BadInput, EngineError

# vLLM's value for "top-k disabled" (vllm.SamplingParams: "top_k must be 0 (disable), or at least 1"); evalgate's
# protocol also uses 0 for disabled. Older vLLM releases used -1; naming it keeps the mapping visible.
VLLM_TOP_K_DISABLED = 0


def sampling_params_kwargs(params: EffectiveParams, seed: int) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` for one sample, from the protocol's values only.

    Args:
        params: the protocol's effective sampling values.
        seed: this sample's sampling seed (``sample_seed``).

    Returns:
        ``n=1``, temperature, top_p, top_k (0 -> ``VLLM_TOP_K_DISABLED``), max_tokens, stop (list, excluded from
        the text), seed, repetition_penalty, and defaults pinned where vLLM would otherwise consult something else
        (min_p 0, presence/frequency penalty 0, no ignore_eos, special tokens skipped in the text).
    """
    return {
        "n": 1,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else VLLM_TOP_K_DISABLED,
        "min_p": 0.0,
        "max_tokens": params.max_tokens,
        "stop": list(params.stop),
        "include_stop_str_in_output": False,
        "seed": int(seed),
        "repetition_penalty": params.repetition_penalty,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "ignore_eos": False,
        "skip_special_tokens": True,
    }


def engine_kwargs(model_dir: str, options: VLLMOptions) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` from the validated options (ranges are checked by ``VLLMOptions``).

    ``generation_config="vllm"`` keeps the checkpoint's ``generation_config.json`` sampling defaults out (see the
    module docstring); the tokenizer is vLLM's (same files as evalgate's) but prompts arrive as token ids.
    """
    kw: dict[str, Any] = {"model": model_dir, "generation_config": "vllm",
                          "tensor_parallel_size": options.tensor_parallel_size,
                          "gpu_memory_utilization": options.gpu_memory_utilization, "dtype": options.dtype,
                          "enforce_eager": options.enforce_eager}
    if options.max_model_len is not None:
        kw["max_model_len"] = options.max_model_len
    if options.block_size is not None:
        kw["block_size"] = options.block_size
    return kw


def completion_from_output(out: Any, prompt_tokens: int) -> Completion:
    """One ``vllm.CompletionOutput`` -> evalgate ``Completion``.

    vLLM's ``finish_reason`` is ``stop`` (EOS, a stop token or a stop string; the text then excludes the stop
    string), ``length`` (max_tokens or max_model_len) or ``abort``. ``completion_tokens`` counts the token ids
    generated (a stop string's tokens included, as with ``hf``).

    Raises:
        EngineError: the request was aborted or has not finished.
    """
    if out.finish_reason not in ("stop", "length"):
        raise EngineError(f"vLLM returned finish_reason={out.finish_reason!r} for a sample (expected stop or "
                          "length); the engine aborted the request, check its log")
    return Completion(out.text, len(out.token_ids), out.finish_reason, prompt_tokens)


def continuation_logprob(prompt_logprobs: Any, ids: Sequence[int], n: int) -> tuple[float, bool]:
    """(summed log-probability, all greedy) of the last ``n`` tokens of ``ids`` from vLLM's ``prompt_logprobs`` (per
    position a mapping token id -> ``Logprob`` with ``logprob`` and ``rank``; None at position 0).

    Raises:
        EngineError: a position lacks its token's log-probability.
    """
    total, greedy = 0.0, True
    for pos in range(len(ids) - n, len(ids)):
        found = prompt_logprobs[pos] if prompt_logprobs is not None and pos < len(prompt_logprobs) else None
        entry = found.get(ids[pos]) if found else None
        if entry is None:
            raise EngineError(f"vLLM returned no prompt log-probability for token {ids[pos]} at position {pos}")
        total += entry.logprob
        greedy = greedy and entry.rank == 1
    return total, greedy


def prompt_logprob_rows(llm: Any, prompts: list[list[int]], scored_from: list[int], first: list[bool]
                        ) -> list[Any]:
    """Each prompt's ``RequestOutput`` from ``llm`` with its prompt log-probabilities (1 per position) valid at
    every position ``>= scored_from[i]``, the rows sharing a context computing it once where the prefix cache allows.

    vLLM computes prompt log-probabilities only at the positions it computes, so by default a request asking for
    them does not read the prefix cache (vLLM's ``SamplingParams.skip_reading_prefix_cache``, set whenever
    ``prompt_logprobs`` is). Here the rows marked ``first`` (one per context) go first, then the others with the cache
    read: a row's output says how many of its prompt tokens came from the cache (``num_cached_tokens``, whole blocks),
    and position ``p``'s log-probability comes from the logits at ``p - 1``, so a row is valid when ``num_cached_tokens
    <= scored_from[i] - 1``; the other rows (the cache reached into their continuation) are run again with the cache
    skipped. A vLLM whose ``SamplingParams`` lacks the field gets one call with the cache skipped.

    Args:
        llm: a ``vllm.LLM``.
        prompts: token ids per row.
        scored_from: per row, the first position whose log-probability is read (the continuation's start).
        first: per row, whether it goes in the first round (the first row of each context).

    Returns:
        One ``RequestOutput`` per row, in order.
    """
    def run(idx: list[int], reuse: bool) -> list[Any]:
        kw = {"skip_reading_prefix_cache": False} if reuse else {}
        params = SamplingParams(n=1, max_tokens=1, temperature=0.0, prompt_logprobs=1, detokenize=False, **kw)
        return list(llm.generate(to_engine_prompts([prompts[i] for i in idx]), params, use_tqdm=False)) if idx else []

    everything = list(range(len(prompts)))
    if "skip_reading_prefix_cache" not in getattr(SamplingParams, "__struct_fields__", ()):
        return run(everything, False)
    outs: list[Any] = [None] * len(prompts)
    redo = []
    for idx in ([i for i in everything if first[i]], [i for i in everything if not first[i]]):
        for i, out in zip(idx, run(idx, True), strict=True):
            if (out.num_cached_tokens or 0) <= scored_from[i] - 1:
                outs[i] = out
            else:
                redo.append(i)
    for i, out in zip(redo, run(redo, False), strict=True):
        outs[i] = out
    return outs


def to_engine_prompts(prompts: list[list[int]]) -> list[Any]:
    """evalgate-tokenized prompts as vLLM ``TokensPrompt`` inputs (vLLM does not tokenize or add a BOS again)."""
    return [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]


def shard(n_rows: int, n_shards: int) -> list[list[int]]:
    """Round-robin assignment of row indices to shards (data parallel workers); empty shards are dropped."""
    return [s for s in ([i for i in range(n_rows) if i % n_shards == k] for k in range(n_shards)) if s]


_ENGINE: dict[str, Any] = {}  # this process's engine: {"key": its LLM kwargs as JSON, "llm": the LLM}


def shared_engine(kwargs: dict[str, Any]) -> tuple[Any, float]:
    """This process's vLLM engine for ``kwargs``, started here if it is not running yet.

    One engine per process, shared by every ``VLLMBackend`` with the same engine arguments: the agent loop
    generates once per turn, a sweep once per split, and ``evalgate`` called in-process (tests, notebooks) once per
    run; starting an engine costs loading the weights, compiling and sizing the KV cache (about a minute on CPU).
    An engine for other arguments (the next checkpoint of a sweep) is shut down first, so its memory is free
    before the next one loads.

    Returns:
        (the ``vllm.LLM``, seconds spent starting it in this call: 0.0 when it was already running).
    """
    key = json.dumps(kwargs, sort_keys=True, default=str)
    if _ENGINE.get("key") == key:
        return _ENGINE["llm"], 0.0
    close_engine()
    from vllm import LLM

    t0 = time.perf_counter()
    llm = LLM(**kwargs)
    _ENGINE.update(key=key, llm=llm)
    return llm, time.perf_counter() - t0


def close_engine() -> None:
    """Shut this process's engine down (its engine-core process ends and frees its memory); nothing if none."""
    llm = _ENGINE.pop("llm", None)
    _ENGINE.pop("key", None)
    if llm is None:
        return
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    del llm
    gc.collect()


def stream_engine(llm: Any, prompts: list[list[int]], sps: list[dict[str, Any]],
                  on_row: Callable[[int, Any], None], on_token: Callable[[], None] | None = None) -> None:
    """Run every prompt through ``llm`` at once, handing each request's ``CompletionOutput`` to ``on_row(index,
    output)`` as soon as that request finishes.

    This is what ``LLM.generate`` does (vLLM 0.33 ``LLM._run_engine``: queue every request, then
    ``llm_engine.step()`` while ``has_unfinished_requests()``), except that ``generate`` returns only when the last
    request is done; here finished requests come out as they finish, so the run stores them at once and a killed
    run resumes from them. Requests are queued with the public ``LLM.enqueue`` (vLLM >= 0.32); an engine without it
    falls back to one ``LLM.generate`` call. ``on_token`` is called once, when the first step returns output (the
    first token of some request: prefill done).

    Raises:
        EngineError: the engine reported a request id it was not given.
    """
    params = [SamplingParams(**kw) for kw in sps]
    if not hasattr(llm, "enqueue"):
        for i, o in enumerate(llm.generate(to_engine_prompts(prompts), params, use_tqdm=False)):
            on_row(i, o.outputs[0])
        return
    ids = llm.enqueue(to_engine_prompts(prompts), params, use_tqdm=False)
    # enqueue returns the engine's internal ids, "<id>-<8 random characters>" (vLLM 0.33
    # InputProcessor.assign_request_id), while outputs carry the id LLM gave the request (a counter): map both.
    row_of: dict[str, int] = {}
    for i, r in enumerate(ids):
        row_of[str(r)] = i
        row_of.setdefault(str(r).rsplit("-", 1)[0], i)
    engine = llm.llm_engine
    while engine.has_unfinished_requests():
        step = engine.step()
        if step and on_token is not None:
            on_token()
            on_token = None
        for out in step:
            if not out.finished:
                continue
            if out.request_id not in row_of:
                raise EngineError(f"vLLM returned request id {out.request_id!r}, which evalgate did not queue")
            on_row(row_of[out.request_id], out.outputs[0])


def _timed_stream(llm: Any, prompts: list[list[int]], sps: list[dict[str, Any]],
                  on_row: Callable[[int, Any], None]) -> dict[str, float]:
    """``stream_engine`` timed: seconds to the first output (``first_token_s``) and to the last (``generation_s``)."""
    g0 = time.perf_counter()
    first: list[float] = []
    stream_engine(llm, prompts, sps, on_row, on_token=lambda: first.append(time.perf_counter() - g0))
    gen = time.perf_counter() - g0
    return {"first_token_s": first[0] if first else gen, "generation_s": gen}


def _dp_worker(env: dict[str, str], kwargs: dict[str, Any], prompts: list[list[int]], sps: list[dict[str, Any]],
               queue: Any) -> None:
    os.environ.update(env)
    try:
        from vllm import LLM

        t0 = time.perf_counter()
        llm = LLM(**kwargs)
        started = time.perf_counter() - t0
        outs: list[Any] = [None] * len(prompts)
        phases = {"engine_start_s": started, **_timed_stream(llm, prompts, sps, outs.__setitem__)}
        queue.put(("ok", [(o.text, list(o.token_ids), o.finish_reason) for o in outs], phases))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises EngineError
        queue.put(("error", f"{type(e).__name__}: {e}", {}))


def _wait(q: Any, p: Any) -> tuple[str, Any, dict[str, float]]:
    """A worker's (status, payload, phases); a worker that dies without answering (killed, segfault) is an
    error."""
    import queue

    while True:
        try:
            return q.get(timeout=5)
        except queue.Empty:
            if p.exitcode is not None:
                return "error", f"worker exited with code {p.exitcode} before sending its results", {}


class _Out:
    """A CompletionOutput's fields as sent back from a data-parallel worker."""

    def __init__(self, text: str, token_ids: list[int], finish_reason: str | None):
        self.text, self.token_ids, self.finish_reason = text, token_ids, finish_reason


class VLLMBackend:
    """vLLM in-process backend.

    Args:
        model_dir: HF checkpoint directory.
        options: validated ``VLLMOptions`` (tensor_parallel_size, data_parallel_size, gpu_memory_utilization,
            max_model_len, dtype, enforce_eager, block_size; see their docstrings); None: every default.
        tokenizer: the checkpoint's tokenizer if the run already loaded it (``get_backend`` hands it over), used
            only to encode a request that comes without ``prompt_ids``.
    """

    name = "vllm"

    def __init__(self, model_dir: str, options: VLLMOptions | None = None, tokenizer: Any = None):
        # Import the engine now: a partial install (vllm without e.g. xgrammar) then fails in get_backend, which
        # names the missing module, instead of failing later inside generate as an engine error.
        from vllm import LLM  # noqa: F401

        from evalgate.checkpoints.model import load_tokenizer
        from evalgate.protocol.prompts import PromptEncoder

        self.options = options or VLLMOptions()
        self.model_dir = str(model_dir)
        self._weights_checked = False
        self.kwargs = engine_kwargs(self.model_dir, self.options)
        self.data_parallel_size = self.options.data_parallel_size
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(self.model_dir)
        self.encoder = PromptEncoder(self.tokenizer)
        self._timing: dict[str, float] = {"engine_start_s": 0.0, "first_token_s": 0.0, "generation_s": 0.0,
                                          "calls": 0}

    def info(self) -> dict[str, Any]:
        builds = engine_builds("vllm")
        return {"engine": "vllm", "vllm": vllm.__version__,
                "engine_build": " ".join(f"{d} {v}" for d, v in builds.items()), "engine_kwargs": self.kwargs,
                "data_parallel_size": self.data_parallel_size, "requests": "one per sample (n=1, own seed)"}

    def timing(self) -> dict[str, float]:
        """Seconds spent so far by this backend's ``generate`` calls, by phase, summed over the calls.

        ``engine_start_s``: starting the engine (``vllm.LLM``: loading the weights, ``torch.compile`` or CUDA
        graphs, sizing the KV cache; vLLM does these in its engine-core process and does not report them apart to
        this one), 0 for calls that found it running; ``first_token_s``: from queueing the requests to the first
        step that returned output (prefill); ``generation_s``: from queueing to the last completion (first token
        included); ``calls``: generate calls. Data parallel: the slowest worker's seconds per phase.
        """
        return dict(self._timing)

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        """Generate every sample of every request, all queued in one engine at once (per data-parallel worker).

        In one process (``data_parallel_size`` 1) a request's result goes to ``on_result`` as soon as its last
        sample finishes (``stream_engine``); with data-parallel workers, when its worker finishes. The in-process
        engine is started by the first call and reused by every later one, and by other backends in this process
        with the same engine arguments (``shared_engine``): the agent loop calls ``generate`` once per turn and a
        sweep once per split, and a new ``LLM`` each time would reload the weights and, while the old engine's GPU
        memory is not yet released, fail for lack of it. ``timing`` says where the seconds went. Data-parallel workers
        (``data_parallel_size`` > 1) are still processes started per call, each loading the model: correct (they
        exit and free their GPUs) but slow for many turns; persistent workers are not built yet.

        Raises:
            EngineError: the engine failed to start or generate, or aborted a request.
        """
        rows = [(ri, j) for ri, r in enumerate(requests) for j in range(len(r.seeds))]
        encoded = [list(r.prompt_ids) if r.prompt_ids is not None else list(self.encoder.encode(r.prompt, r.key).ids)
                   for r in requests]
        prompts = [encoded[ri] for ri, _ in rows]
        sps = [sampling_params_kwargs(requests[ri].params, requests[ri].seeds[j]) for ri, j in rows]
        per_req: dict[int, dict[int, Completion]] = {i: {} for i in range(len(requests))}
        results: list[GenerationResult | None] = [None] * len(requests)

        def take(k: int, out: Any) -> None:
            ri, j = rows[k]
            per_req[ri][j] = completion_from_output(out, len(encoded[ri]))
            if len(per_req[ri]) == len(requests[ri].seeds):
                res = GenerationResult(requests[ri], tuple(per_req[ri][x] for x in range(len(requests[ri].seeds))))
                results[ri] = res
                if on_result:
                    on_result(res)

        if not self._weights_checked:  # before the engine starts: vLLM would generate from NaN weights
            from evalgate.checkpoints.model import check_finite_weights

            check_finite_weights(Path(self.model_dir))
            self._weights_checked = True
        try:
            if self.data_parallel_size == 1:
                llm, started = shared_engine(self.kwargs)
                phases = {"engine_start_s": started, **_timed_stream(llm, prompts, sps, take)}
            else:
                outs, phases = self._generate_data_parallel(prompts, sps)
                for row, out in enumerate(outs):
                    take(row, out)
            for phase in ("engine_start_s", "first_token_s", "generation_s"):
                self._timing[phase] += phases[phase]
            self._timing["calls"] += 1
        except EngineError:
            raise
        except Exception as e:  # noqa: BLE001 - any engine failure becomes an EngineError with context
            raise EngineError(f"vLLM failed: {type(e).__name__}: {e}") from e
        return [r for r in results if r is not None]

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest],
                      on_result: Callable[[LoglikelihoodResult], None] | None = None) -> list[LoglikelihoodResult]:
        """Each request's continuations scored after its context (``prompt_logprob_rows``; see the module docstring).

        Raises:
            BadInput: ``data_parallel_size`` > 1.
            EngineError: the engine failed, or returned no log-probability for a continuation token.
        """
        if self.data_parallel_size != 1:
            raise BadInput("the vllm backend scores log-likelihoods in this process only: set data_parallel_size=1")
        rows = [(ri, list(r.context_ids) + list(c), len(c)) for ri, r in enumerate(requests) for c in r.continuations]
        first = [k == 0 or rows[k - 1][0] != ri for k, (ri, _, _) in enumerate(rows)]
        if not self._weights_checked:
            from evalgate.checkpoints.model import check_finite_weights

            check_finite_weights(Path(self.model_dir))
            self._weights_checked = True
        try:
            llm, started = shared_engine(self.kwargs)
            g0 = time.perf_counter()
            outs = prompt_logprob_rows(llm, [ids for _, ids, _ in rows], [len(ids) - n for _, ids, n in rows], first)
            gen = time.perf_counter() - g0
        except Exception as e:  # noqa: BLE001 - any engine failure becomes an EngineError with context
            raise EngineError(f"vLLM failed: {type(e).__name__}: {e}") from e
        for phase, value in (("engine_start_s", started), ("first_token_s", gen), ("generation_s", gen)):
            self._timing[phase] += value
        self._timing["calls"] += 1
        scored = [continuation_logprob(out.prompt_logprobs, ids, n) for (_, ids, n), out in zip(rows, outs,
                                                                                                strict=True)]
        results, k = [], 0
        for r in requests:
            part = scored[k:k + len(r.continuations)]
            k += len(r.continuations)
            res = LoglikelihoodResult(r, tuple(lp for lp, _ in part), tuple(g for _, g in part))
            results.append(res)
            if on_result:
                on_result(res)
        return results

    def _generate_data_parallel(self, prompts: list[list[int]], sps: list[dict[str, Any]]
                                ) -> tuple[list[Any], dict[str, float]]:
        """Deal the rows out to ``data_parallel_size`` worker processes, each with its own engine (``_dp_worker``);
        returns every row's output in order and the phases' seconds (the slowest worker's, per phase)."""
        import multiprocessing as mp

        parts = shard(len(prompts), self.data_parallel_size)
        envs = worker_envs(len(parts), self.kwargs["tensor_parallel_size"])
        ctx = mp.get_context("spawn")
        queues, procs = [], []
        for env, idx in zip(envs, parts, strict=True):
            q = ctx.Queue()
            p = ctx.Process(target=_dp_worker, args=(env, self.kwargs, [prompts[i] for i in idx],
                                                     [sps[i] for i in idx], q))
            p.start()
            queues.append(q)
            procs.append(p)
        outs: list[Any] = [None] * len(prompts)
        phases = {"engine_start_s": 0.0, "first_token_s": 0.0, "generation_s": 0.0}
        for idx, q, p in zip(parts, queues, procs, strict=True):
            status, payload, took = _wait(q, p)
            p.join()
            if status != "ok":
                raise EngineError(f"vLLM data-parallel worker failed: {payload}")
            for i, (text, ids, fr) in zip(idx, payload, strict=True):
                outs[i] = _Out(text, ids, fr)
            phases = {k: max(v, took[k]) for k, v in phases.items()}
        return outs, phases


def worker_envs(n_workers: int, tp: int) -> list[dict[str, str]]:
    """The environment of each data-parallel worker: its own GPUs (``CUDA_VISIBLE_DEVICES``, ``tp`` each) on a GPU
    build; on vLLM's CPU build its own cores (``VLLM_CPU_OMP_THREADS_BIND``, the cores this process may use dealt
    out in contiguous blocks), unless the user bound threads already.

    Raises:
        BadInput: fewer GPUs (or, on CPU, cores) than workers x ``tp``.
    """
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        if "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
            return [{} for _ in range(n_workers)]
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < n_workers * tp:
            raise BadInput(f"data_parallel_size={n_workers} x tensor_parallel_size={tp} needs {n_workers * tp} CPU "
                           f"cores on vLLM's CPU build; this process may use {len(cores)}")
        per = len(cores) // (n_workers * tp)
        blocks = [",".join(map(str, cores[k * per:(k + 1) * per])) for k in range(n_workers * tp)]
        return [{"VLLM_CPU_OMP_THREADS_BIND": "|".join(blocks[w * tp:(w + 1) * tp])} for w in range(n_workers)]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = visible.split(",") if visible else [str(i) for i in range(tp * n_workers)]
    if len(gpus) < tp * n_workers:
        raise BadInput(f"data_parallel_size={n_workers} x tensor_parallel_size={tp} needs {tp * n_workers} GPUs; "
                       f"CUDA_VISIBLE_DEVICES lists {len(gpus)}")
    return [{"CUDA_VISIBLE_DEVICES": ",".join(gpus[k * tp:(k + 1) * tp])} for k in range(n_workers)]
