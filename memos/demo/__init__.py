"""The packaged demo: a long scripted function-calling session and its replay."""

from .run import DemoResult, plot_tokens, run_demo
from .session import CONSTRAINTS, IDENTIFIERS, demo_session

__all__ = ["CONSTRAINTS", "IDENTIFIERS", "DemoResult", "demo_session", "plot_tokens", "run_demo"]
