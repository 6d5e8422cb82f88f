"""The ``hf`` backend: transformers ``generate`` on CPU or GPU, batched and left-padded.

- Rows (one per sample) are sorted by prompt length and packed into batches whose padded size
  ``rows * (longest prompt + max_tokens)`` stays within ``token_budget``, which cuts padding.
- Sampling is per row: ``sampler.SeededSampler`` draws every row's next token at once on the model's device, from
  noise keyed by the row's sample seed and decoding step (Gumbel-max), so a sample does not depend on which other
  rows share its batch. Generation then runs in greedy mode over the sampler's one-hot output, with HF's repetition
  penalty applied before it.
- Stop sequences end generation while it runs (``GeneratedStopCriteria``), matched inside the generated text
  only, as vLLM and OpenAI-style servers do: transformers' own ``stop_strings`` also sees the prompt's last
  tokens, so a prompt ending in a newline and a first generated token "```" matched the stop "\\n```" across the
  boundary. The returned text is cut before the stop sequence and finish_reason is ``stop``. A row that reaches
  max_tokens without EOS or a stop sequence is ``length``.
- The checkpoint's ``generation_config.json`` never applies: transformers fills every generate() value left
  unset from ``model.generation_config`` (loaded from that file), so the model's generation config is replaced
  by one holding only the special token ids, and every sampling value comes from the protocol. What was
  ignored and what was sent are both in ``info()``.
- Prompts are token ids from ``prompts.PromptEncoder`` (one BOS, never two), normally computed by the run.
- Log-likelihoods (``loglikelihood``): per request, the context goes through the model once, its keys and values
  cached; the continuations' tokens then run on copies of that cache in right-padded batches (at most
  ``token_budget`` tokens, context included, and ``LOGITS_BUDGET`` logits). The float32 log-softmax at the positions
  before each continuation token gives its log-probability, summed per continuation, and ``greedy`` says whether
  every token was the argmax, as lm-evaluation-harness's ``HFLM._loglikelihood_tokens`` computes them (it feeds each
  context-and-continuation row whole; the values agree to float32 rounding, tests/backends/test_hf_loglikelihood.py).
- Progress during a batch: a whole batch is one ``generate()`` call (minutes on CPU), so when ``on_result`` has a
  ``progress(finished, note)`` method (``Backend``), ``DecodingProgress`` reports after decoding steps how many
  samples of the call have finished and which token the batch is at.
"""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
import transformers
from safetensors import SafetensorError
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)

from evalgate.backends.base import (
    Completion,
    EffectiveParams,
    GenerationRequest,
    GenerationResult,
    HFOptions,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    cut_at_stop,
    plan_batches,
)
from evalgate.backends.sampler import SAMPLER_VERSION, SeededSampler
from evalgate.checkpoints.model import load_tokenizer, nonfinite_count
from evalgate.core.errors import BadInput, EngineError
from evalgate.protocol.prompts import PromptEncoder


class GeneratedStopCriteria(StoppingCriteria):
    """Ends a row once a stop string occurs in the text it generated (never in its prompt).

    Each step decodes only the row's last generated tokens: a window of as many tokens as the longest stop
    string has UTF-8 bytes, plus slack, which holds any occurrence that ends at this step since every token
    decodes to at least one byte. Cost: one short decode per row per step.

    Args:
        tokenizer: the checkpoint's tokenizer.
        stops: the protocol's stop strings (non-empty ones are used).
        prompt_width: the batch's padded prompt length; tokens from this position on are generated.
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_width: int):
        self.tokenizer, self.stops = tokenizer, [s for s in stops if s]
        self.prompt_width = prompt_width
        self.window = max((len(s.encode()) for s in self.stops), default=0) + 4
        self.last: torch.Tensor | None = None  # this step's result, for ``DecodingProgress``

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        start = max(self.prompt_width, input_ids.shape[1] - self.window)
        tails = self.tokenizer.batch_decode(input_ids[:, start:].tolist(), skip_special_tokens=True)
        done = [any(s in t for s in self.stops) for t in tails]
        self.last = torch.tensor(done, dtype=torch.bool, device=input_ids.device)
        return cast(torch.BoolTensor, self.last)


LOGITS_BUDGET = 2**28
"""Most logits (rows x positions x vocabulary, float32: 1 GiB) one log-likelihood batch computes at once."""

REPORT_INTERVAL_S = 0.5
"""Least seconds between two ``DecodingProgress`` reports (each one waits for the device: a GPU decodes ahead of
the host otherwise)."""


class DecodingProgress(StoppingCriteria):
    """Stops no row: reports how far a batch's ``generate()`` got, after its first decoding step and then at most
    every ``REPORT_INTERVAL_S`` seconds, as ``report(finished, tokens)``: the rows that have finished (emitted an
    end-of-sequence id, or matched a stop string) and the tokens decoded per row so far.

    transformers calls each stopping criterion once per decoding step with every row's ids so far, which makes it
    the one per-step hook of ``generate`` that sees the whole batch (its text streamers take one row). A finished
    row is padded from then on (with pad, often an EOS id), so finishing is kept per row once seen.

    Args:
        prompt_width: the batch's padded prompt length (ids from this position on are generated).
        eos_ids: the ids that end a row.
        stops: the batch's stop-string criterion, placed before this one in the list (its ``last`` result is read),
            or None.
        report: called with (rows finished, tokens decoded); only reports, its return is ignored.
    """

    def __init__(self, prompt_width: int, eos_ids: Sequence[int], stops: GeneratedStopCriteria | None,
                 report: Callable[[int, int], None]):
        self.prompt_width, self.stops, self.report = prompt_width, stops, report
        self.eos = torch.tensor(list(eos_ids), dtype=torch.long)
        self.finished: torch.Tensor | None = None
        self.reported_at: float | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        if self.eos.device != input_ids.device:
            self.eos = self.eos.to(input_ids.device)  # once, not a copy per step
        ended = torch.isin(input_ids[:, -1], self.eos)
        if self.stops is not None and self.stops.last is not None:
            ended |= self.stops.last
        self.finished = ended if self.finished is None else self.finished | ended
        now = time.monotonic()
        if self.reported_at is None or now - self.reported_at >= REPORT_INTERVAL_S:
            self.reported_at = now
            self.report(int(self.finished.sum()), input_ids.shape[1] - self.prompt_width)
        return cast(torch.BoolTensor, torch.zeros_like(ended))


def check_finite(model: Any, where: str) -> None:
    """Refuse a model whose loaded weights hold NaN or infinity, before it generates anything.

    A single non-finite weight makes every logit NaN, and greedy decoding then emits an arbitrary token (often EOS
    at once): a "complete" run of empty or garbage completions, scored as wrong, with nothing said. The check runs
    on the loaded parameters and buffers (so in the run's dtype: an fp32 value beyond the fp16 range that became
    infinite on conversion is caught too); ``nonfinite_count`` per floating tensor costs a fraction of the load
    (docs/BENCHMARKS.md, bench/finite_check.py).

    Args:
        model: a loaded torch module.
        where: the checkpoint path, for the message.

    Raises:
        BadInput: naming the first non-finite tensor, how many of its values are non-finite, and the checkpoint.
    """
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    for name, t in tensors:
        if bad := nonfinite_count(t.detach()):
            raise BadInput(f"checkpoint {where}: tensor {name} holds {bad} non-finite value(s) (NaN or infinity) "
                           f"of {t.numel()}: the model cannot produce meaningful output. The training step that "
                           "saved it diverged or the file is damaged; evaluate another checkpoint")


def _batch_report(progress: Callable[[int, str], None], before: int, batch: str,
                  max_tokens: int) -> Callable[[int, int], None]:
    """``DecodingProgress``'s report for one batch, as the ``progress(finished, note)`` of ``Backend.generate``:
    ``before`` samples finished in earlier batches; the note names the batch and the token it is at."""
    def report(done: int, tokens: int) -> None:
        progress(before + done, f"{batch} at token {tokens}/{max_tokens}")
    return report


class HFBackend:
    """transformers backend.

    Args:
        model_dir: HF checkpoint directory.
        options: validated ``HFOptions`` (device, dtype, token_budget); None: every default.
        tokenizer: the checkpoint's tokenizer if the caller already loaded it (``run.evaluate`` does), else it is
            loaded from ``model_dir``.
    """

    name = "hf"

    def __init__(self, model_dir: str, options: HFOptions | None = None, tokenizer: Any = None):
        self.options = options or HFOptions()
        self.model_dir, self.device, self.token_budget = str(model_dir), self.options.device, self.options.token_budget
        self.dtype = self.options.resolved_dtype
        self._model: Any = None
        self._ckpt_eos: Any = None
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(self.model_dir)
        self.encoder = PromptEncoder(self.tokenizer)
        self.load_s: float | None = None
        self.ignored_generation_config: dict[str, Any] = {}
        self.sent: dict[str, Any] = {}

    def info(self) -> dict[str, Any]:
        """Engine and versions; ``ignored_generation_config``: the checkpoint's generation_config.json values
        that were not applied; ``sent``: the generation parameters the last batch passed to ``generate``."""
        return {"engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
                "device": self.device, "dtype": self.dtype, "token_budget": self.token_budget,
                "eos_token_ids": self._eos_ids(), "ignored_generation_config": self.ignored_generation_config,
                "sent": self.sent}

    def _eos_ids(self) -> list[int]:
        ids = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        if self._model is not None:
            for i in [self._ckpt_eos] if isinstance(self._ckpt_eos, int) else (self._ckpt_eos or []):
                ids.add(int(i))
        return sorted(ids)

    @property
    def model(self) -> Any:
        """The model, loaded on first use (a fully cached run never loads it)."""
        if self._model is None:
            t0 = time.perf_counter()
            try:
                model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=getattr(torch, self.dtype))
            except (OSError, ValueError, SafetensorError) as e:  # missing, truncated or malformed checkpoint files
                raise BadInput(f"transformers could not load the checkpoint {self.model_dir}: {type(e).__name__}: "
                               f"{e}. Check that its files are complete (a truncated copy or download?)") from e
            check_finite(model, self.model_dir)
            model.to(self.device).eval()  # type: ignore[arg-type]  # transformers' stub types .to() oddly
            gc = model.generation_config
            self._ckpt_eos = gc.eos_token_id
            self.ignored_generation_config = {
                k: v for k, v in gc.to_diff_dict().items()
                if k not in ("bos_token_id", "eos_token_id", "pad_token_id", "transformers_version")}
            self._model = model
            # Replace, not merge: transformers fills unset generate() values from model.generation_config.
            model.generation_config = GenerationConfig(
                bos_token_id=gc.bos_token_id, eos_token_id=self._eos_ids(), pad_token_id=self._pad_id())
            self.load_s = time.perf_counter() - t0
        return self._model

    def _pad_id(self) -> int:
        tok = self.tokenizer
        return int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)

    def encode(self, request: GenerationRequest) -> list[int]:
        """Token ids of a request's prompt: ``prompt_ids`` if the caller gave them, else the encoder's."""
        if request.prompt_ids is not None:
            return list(request.prompt_ids)
        return list(self.encoder.encode(request.prompt, request.key).ids)

    def generate(self, requests: Sequence[GenerationRequest],
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        """Generate every sample of every request; see the module docstring for batching and sampling.

        Raises:
            EngineError: generation failed.
        """
        rows = []  # (request index, position in request, prompt ids, seed)
        encoded = [self.encode(r) for r in requests]
        for ri, r in enumerate(requests):
            for j, seed in enumerate(r.seeds):
                rows.append((ri, j, encoded[ri], seed))
        rows.sort(key=lambda row: len(row[2]))
        done: dict[int, dict[int, Completion]] = {i: {} for i in range(len(requests))}
        results: list[GenerationResult | None] = [None] * len(requests)
        plan = plan_batches([(len(row[2]), requests[row[0]].params) for row in rows], self.token_budget)
        progress = getattr(on_result, "progress", None)  # the Backend protocol's optional progress report
        finished = 0  # samples of earlier batches
        for b, idx in enumerate(plan):
            batch = [rows[k] for k in idx]
            params = requests[batch[0][0]].params
            report = (None if progress is None
                      else _batch_report(progress, finished, f"batch {b + 1}/{len(plan)}", params.max_tokens))
            comps = self._generate_batch(batch, params, report)
            finished += len(batch)
            for (ri, j, _ids, _), comp in zip(batch, comps, strict=True):
                done[ri][j] = comp
                if len(done[ri]) == len(requests[ri].seeds):
                    res = GenerationResult(requests[ri], tuple(done[ri][k] for k in range(len(requests[ri].seeds))))
                    results[ri] = res
                    if on_result:
                        on_result(res)
        return [r for r in results if r is not None]

    def _generate_batch(self, batch: list[tuple[int, int, list[int], int]], p: EffectiveParams,
                        report: Callable[[int, int], None] | None = None) -> list[Completion]:
        model, pad = self.model, self._pad_id()
        width = max(len(b[2]) for b in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for k, (_, _, ids, _) in enumerate(batch):  # left padding
            input_ids[k, width - len(ids):] = torch.tensor(ids)
            attention[k, width - len(ids):] = 1
        # Set even at its neutral value: transformers fills an unset value from the model's config. use_cache is
        # explicit because HF Trainer checkpoints save use_cache: false, which makes decoding quadratic.
        gen = GenerationConfig(
            max_new_tokens=p.max_tokens, do_sample=False, num_beams=1, use_cache=True,
            repetition_penalty=p.repetition_penalty, eos_token_id=self._eos_ids(), pad_token_id=pad,
            bos_token_id=model.generation_config.bos_token_id,
        )
        processors = LogitsProcessorList()
        sampler = None
        if p.temperature > 0:
            sampler = {"temperature": p.temperature, "top_k": p.top_k, "top_p": p.top_p, "seeds": "per row",
                       "rule": SAMPLER_VERSION}
            processors.append(SeededSampler([b[3] for b in batch], width, p.temperature, p.top_k, p.top_p))
        stop = GeneratedStopCriteria(self.tokenizer, p.stop, width) if any(p.stop) else None
        stops = StoppingCriteriaList([stop] if stop else [])
        self.sent = {"generation_config": gen.to_diff_dict(), "seeded_sampler": sampler,
                     "stop": {"strings": list(p.stop), "matched_in": "generated text only"} if stops else None}
        if report is not None:  # after the stop criterion, whose result it reads; not in ``sent``: it stops nothing
            stops.append(DecodingProgress(width, self._eos_ids(), stop, report))
        try:
            with torch.inference_mode():
                out = model.generate(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                                     generation_config=gen, logits_processor=processors, stopping_criteria=stops)
        except Exception as e:  # noqa: BLE001 - any engine failure becomes an EngineError with context
            raise EngineError(f"transformers generate failed: {type(e).__name__}: {e}") from e
        new = out[:, width:].cpu().tolist()
        return [self._completion(ids, p, len(b[2])) for ids, b in zip(new, batch, strict=True)]

    def _completion(self, ids: list[int], p: EffectiveParams, prompt_tokens: int) -> Completion:
        eos = set(self._eos_ids())
        n_tokens, hit_eos = len(ids), False
        for k, t in enumerate(ids):
            if t in eos:
                n_tokens, hit_eos = k, True
                break
        # After a stop string ends a row, transformers pads it with pad (== an EOS id for many models); those
        # pads are caught by the EOS scan above. A pad that is not EOS is trimmed here.
        toks = ids[:n_tokens]
        pad = self._pad_id()
        while toks and toks[-1] == pad and pad not in eos:
            toks.pop()
        text = self.tokenizer.decode(toks, skip_special_tokens=True)
        text, stopped = cut_at_stop(text, p.stop)
        if stopped:
            return Completion(text, len(toks), "stop", prompt_tokens)
        finish = "stop" if hit_eos or len(toks) < p.max_tokens else "length"
        return Completion(text, len(toks), finish, prompt_tokens)

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest],
                      on_result: Callable[[LoglikelihoodResult], None] | None = None) -> list[LoglikelihoodResult]:
        """Each request's continuations scored after its context (see the module docstring), in request order; a
        request's result goes to ``on_result`` once all its continuations are scored.

        Raises:
            BadInput: a row longer than the model's context (``max_position_embeddings``).
            EngineError: the forward pass failed.
        """
        limit = getattr(self.model.config, "max_position_embeddings", None)
        for r in requests:
            for c in r.continuations:
                if limit is not None and len(r.context_ids) + len(c) - 1 > limit:
                    raise BadInput(f"item {r.key!r}: prompt and option are {len(r.context_ids) + len(c)} tokens, "
                                   f"beyond the model's context of {limit}; shorten the prompt")
        results = []
        for r in requests:
            try:
                scored = self._score_request(list(r.context_ids), [list(c) for c in r.continuations])
            except Exception as e:  # noqa: BLE001 - any engine failure becomes an EngineError with context
                raise EngineError(f"transformers forward pass failed on item {r.key!r}: {type(e).__name__}: {e}"
                                  ) from e
            res = LoglikelihoodResult(r, tuple(s[0] for s in scored), tuple(s[1] for s in scored))
            results.append(res)
            if on_result:
                on_result(res)
        return results

    def _score_request(self, context: list[int], conts: list[list[int]]) -> list[tuple[float, bool]]:
        """(summed log-probability, all tokens greedy) of each continuation after ``context``: the context goes
        through the model once (its keys and values cached, the logits of its last position kept: they predict
        every continuation's first token), then the continuations' other tokens in right-padded batches on copies
        of that cache, at most ``token_budget`` context-and-continuation tokens and ``LOGITS_BUDGET`` logits a
        batch."""
        model = self.model
        params = inspect.signature(model.forward).parameters
        keep = {"logits_to_keep": 1} if "logits_to_keep" in params else {}  # a remote-code model may lack it
        cache_arg = "cache" if "cache" in params else "past_key_values"  # 5.25's name; 5.19's past_key_values
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([context], device=self.device), use_cache=True, **keep)
            cache = getattr(out, cache_arg)
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            top = int(first.argmax())
            sums = [float(first[c[0]]) for c in conts]
            greedy = [top == c[0] for c in conts]
            rest = sorted((k for k, c in enumerate(conts) if len(c) > 1), key=lambda k: len(conts[k]))
            max_positions = max(LOGITS_BUDGET // max(int(model.config.vocab_size), 1), 1)
            batches: list[list[int]] = []
            for k in rest:  # by length, so a batch's width is its last continuation's
                width = len(conts[k]) - 1
                if batches and (len(batches[-1]) + 1) * (len(context) + width) <= self.token_budget \
                        and (len(batches[-1]) + 1) * width <= max_positions:
                    batches[-1].append(k)
                else:
                    batches.append([k])
            for b, batch in enumerate(batches):
                width = len(conts[batch[-1]]) - 1
                ids = torch.full((len(batch), width), self._pad_id(), dtype=torch.long)
                attention = torch.zeros((len(batch), len(context) + width), dtype=torch.long)
                attention[:, :len(context)] = 1
                for i, k in enumerate(batch):
                    fed = conts[k][:-1]  # the last token is predicted, never fed (lm-eval's [:-1])
                    ids[i, :len(fed)] = torch.tensor(fed)
                    attention[i, len(context):len(context) + len(fed)] = 1
                past = cache if b == len(batches) - 1 else copy.deepcopy(cache)
                past.batch_repeat_interleave(len(batch))
                logits = model(input_ids=ids.to(self.device), attention_mask=attention.to(self.device),
                               use_cache=True, **{cache_arg: past}).logits
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                for i, k in enumerate(batch):
                    target = torch.tensor(conts[k][1:], device=logprobs.device)
                    window = logprobs[i, :len(target)]
                    sums[k] += float(window.gather(1, target.unsqueeze(1)).squeeze(1).sum())
                    greedy[k] = greedy[k] and bool((window.argmax(dim=-1) == target).all())
        return list(zip(sums, greedy, strict=True))
