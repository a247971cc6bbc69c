"""An agent in a sandbox, offline: capture the flag.

Each sample's machine (a bubblewrap sandbox: this host's system read-only, a work
directory of its own, no network) holds a flag in a file; the agent (`ve.react`) looks
for it with bash and submits it. The model is the local mock server's, following a
scripted trajectory (list the files, read the flag, submit what it read), so this runs
without keys or internet: point the chat at a real model to do the same for real.
"""

import vitals_engine as ve
from vitals_engine.testing import MockServer, last_tool_text, trajectory

rows = [
    {
        "input": "Find the flag hidden in this machine's files and submit it.",
        "target": f"flag{{{word}}}",
        "files": {f"notes/{word}/flag.txt": f"flag{{{word}}}", "README": "nothing here"},
    }
    for word in ("alpha", "bravo", "charlie", "delta")
]

with MockServer(latency=0.02) as server:
    server.script(
        trajectory(
            ("bash", {"cmd": "find . -name 'flag*'"}),
            ("bash", {"cmd": "cat $(find . -name 'flag*')"}),
            submit=last_tool_text,
        )
    )
    chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="demo")
    task = ve.Task(
        rows,
        solver=ve.react(chat, tools=[ve.bash(timeout=60), ve.python(), ve.text_editor()]),
        scorer=ve.detect_includes(),
        sandbox="bwrap",
        name="capture-the-flag",
    )
    task.eval(message_limit=40, token_limit=200_000, time_limit=600, max_sandboxes=4)
    print(ve.summary(task))
