"""A suite result as files and as text: report.json (everything the runner recorded: per
turn pass/fail, checks, steps, tool calls with arguments, results and latency, tokens) and
transcript.txt (the conversation as a person reads it), plus the pass/fail table."""
from __future__ import annotations

import json
from pathlib import Path

from agents.text import clip


def _call_line(call: dict) -> str:
    args = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"], ensure_ascii=False)
    res = call["result"]
    if call.get("skipped"):
        return f"    -> {call['name']}({clip(args, 300)})  [not run: {clip(str(res.get('error')), 120)}]"
    shown = json.dumps(res.get("data"), ensure_ascii=False, default=str) if res.get("ok") else "ERROR " + str(res.get("error"))
    retry = f", {call['attempts']} attempts" if call.get("attempts", 1) > 1 else ""
    return (f"    -> {call['name']}({clip(args, 300)})  [{call['latency_s'] * 1000:.0f} ms{retry}]\n"
            f"    <- {clip(shown, 300)}")


def turn_transcript(turn: dict) -> str:
    faults = f" ({turn['faults_injected']} injected tool failures)" if turn.get("faults_injected") else ""
    lines = [f"--- turn {turn['name']}{' (new session)' if turn.get('new_session') else ''}{faults}: "
             f"{'PASS' if turn['passed'] else 'FAIL'}",
             f"USER: {turn['user'].strip()}"]
    for step in turn["steps"]:
        head = f"  step {step['number']} [{step['kind']}, tool_choice {step['tool_choice']}, {step['latency_s']:.1f} s]"
        lines.append(head)
        if step["content"] and step["kind"] != "answer":
            lines.append(f"    model: {clip(step['content'], 300)}")
        lines += [_call_line(c) for c in step["calls"]]
        if step.get("observation"):
            lines.append(f"    loop: {clip(step['observation'], 200)}")
    lines.append(f"ASSISTANT: {turn['answer'] if turn['answer'] is not None else '(no answer: ' + turn['stop'] + ')'}")
    lines += [f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}" + (f"  ({c['detail']})" if c["detail"] and not c["ok"] else "")
              for c in turn["checks"]]
    return "\n".join(lines)


def transcript(report: dict) -> str:
    out = [f"suite {report['suite']} on {report['model']} ({report['backend']}, revision {report['revision']}), "
           f"temperature {report['agent']['temperature']}"]
    for run in report["runs"]:
        out.append(f"\n===== seed {run['seed']}: {'PASS' if run['passed'] else 'FAIL'} ({run['latency_s']:.0f} s)")
        out += [turn_transcript(t) for t in run["turns"]]
    return "\n".join(out) + "\n"


def table(report: dict) -> str:
    """Pass/fail per turn: one row per turn, one column per seed, then the pass rate."""
    runs = report["runs"]
    names = [t["name"] for t in runs[0]["turns"]] if runs else []
    width = max([len(n) for n in names] + [4])
    head = f"{'turn':<{width}}  " + " ".join(f"s{r['seed']:<4}" for r in runs) + "  pass rate  mean s  calls"
    rows = [head, "-" * len(head)]
    for i, name in enumerate(names):
        recs = [r["turns"][i] for r in runs]
        marks = " ".join(f"{'pass' if t['passed'] else 'FAIL':<5}" for t in recs)
        calls = sum(not c.get("skipped") for t in recs for s in t["steps"] for c in s["calls"]) / len(recs)
        rows.append(f"{name:<{width}}  {marks}  {sum(t['passed'] for t in recs) / len(recs):9.0%}  "
                    f"{sum(t['latency_s'] for t in recs) / len(recs):6.1f}  {calls:5.1f}")
    s = report["summary"]
    rows.append(f"{'all':<{width}}  " + " ".join(f"{'pass' if r['passed'] else 'FAIL':<5}" for r in runs)
                + f"  {s['pass_rate']:9.0%}")
    return "\n".join(rows)


def write(report: dict, directory: Path) -> tuple[Path, Path]:
    """Write report.json and transcript.txt under `directory`; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, text_path = directory / "report.json", directory / "transcript.txt"
    json_path.write_text(json.dumps(report, indent=1, ensure_ascii=False, default=str))
    text_path.write_text(transcript(report) + "\n" + table(report) + "\n")
    return json_path, text_path


def failures(report: dict) -> str:
    """What failed, in words: per turn, each failed check with the seeds it failed in and why."""
    lines = []
    for i, name in enumerate(t["name"] for t in (report["runs"][0]["turns"] if report["runs"] else [])):
        seen: dict[str, list[str]] = {}
        for run in report["runs"]:
            turn = run["turns"][i]
            reasons = [f"{c['check']}" + (f" ({c['detail']})" if c["detail"] else "") for c in turn["checks"] if not c["ok"]]
            if turn["answer"] is None:
                reasons.append(f"no answer: the turn stopped at {turn['stop']}" + (f" ({turn['error']})" if turn.get("error") else ""))
            for reason in reasons:
                seen.setdefault(reason, []).append(f"s{run['seed']}")
        lines += [f"turn {name} failed {len(seeds)}x ({', '.join(seeds)}): {reason}" for reason, seeds in seen.items()]
    return "\n".join(lines) if lines else "every turn of every seed passed"
