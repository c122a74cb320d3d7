"""Answers Cairn's open human waits: reviews, approvals and questions.

    python answer_waits.py                     # ask on the terminal, wait by wait
    python answer_waits.py --approve           # approve every open wait
    python answer_waits.py --reject "shorter"  # reject every open wait with this feedback
    python answer_waits.py --run RUN_ID        # only that run's waits
    python answer_waits.py --follow            # keep answering new waits (Ctrl-C stops)

Talks to `CAIRN_SERVER` with `CAIRN_TOKEN` (an operator's). A wait someone
else answered meanwhile is skipped (409 `wait_closed`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from cairn_client import Client, Conflict

ASK = "[a]pprove, [r]eject with feedback, [s]kip? "


def show(wait: Any) -> None:
    print(f"\n{wait.kind} wait {wait.id} (run {wait.run_id}, step {wait.step_idx}, "
          f"attempt {wait.attempt}):")
    print(json.dumps(wait.prompt, indent=2, ensure_ascii=False))


def decide(wait: Any, args: argparse.Namespace) -> tuple[str, dict[str, Any]] | None:
    """(decision, its fields), from the flags or the terminal; None to skip."""
    if args.approve:
        return "approve", {}
    if args.reject is not None:
        return "reject", {"feedback": args.reject}
    show(wait)
    choice = input(ASK).strip().lower()[:1]
    if choice == "a":
        return "approve", {}
    if choice == "r":
        return "reject", {"feedback": input("feedback: ")}
    return None


def answer_open_waits(cairn: Client, args: argparse.Namespace) -> int:
    """Answers the open waits once; returns how many it answered."""
    answered = 0
    for wait in cairn.waits.list(run=args.run, status="open"):
        decision = decide(wait, args)
        if decision is None:
            continue
        try:
            result = cairn.waits.answer(wait.id, decision[0], by=args.by, **decision[1])
        except Conflict as e:
            print(f"wait {wait.id}: {e.code} (answered elsewhere?); skipped")
            continue
        answered += 1
        print(f"wait {wait.id}: {decision[0]}; run {result.run.id} is {result.run.status}")
    return answered


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--approve", action="store_true", help="approve every open wait")
    how.add_argument("--reject", metavar="FEEDBACK", help="reject every open wait")
    parser.add_argument("--run", help="only this run's waits")
    parser.add_argument("--by", default="answer_waits.py", help="a note on who answered")
    parser.add_argument("--follow", action="store_true", help="keep answering new waits")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    with Client.from_env() as cairn:
        total = answer_open_waits(cairn, args)
        while args.follow:
            time.sleep(2)
            total += answer_open_waits(cairn, args)
    print(f"answered {total} wait(s)")
    return total


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
