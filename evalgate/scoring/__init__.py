"""Scoring: pass@k, sandboxed code execution, behaviour metrics, and the scorer registry."""

from evalgate.scoring.base import SCORERS, SampleToScore, Scorer, ScoreResult, get_scorer
from evalgate.scoring.behavior import aggregate_behavior, repetition_ratio, sample_behavior
from evalgate.scoring.code import ExecResult, run_code, run_many
from evalgate.scoring.exact import exact_match, normalize
from evalgate.scoring.extract import extract_answer
from evalgate.scoring.math import math_equal
from evalgate.scoring.passk import mean_pass_at_k, pass_at_k

__all__ = ["SCORERS", "ExecResult", "SampleToScore", "ScoreResult", "Scorer", "aggregate_behavior", "exact_match",
           "extract_answer", "get_scorer", "math_equal", "normalize",
           "mean_pass_at_k", "pass_at_k", "repetition_ratio", "run_code", "run_many", "sample_behavior"]
