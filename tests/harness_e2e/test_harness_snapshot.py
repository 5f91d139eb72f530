"""Issue 14 item 5 through the real DeepSeek Harness: the plugin in snapshot mode
(`workspace: snapshot`) governs an agent whose directory the governor cannot see — it lies under
none of the server's workspace roots — by uploading snapshots: a wrong write is steered, the
repair is certified, and every verdict names a tree the plugin uploaded."""

from __future__ import annotations

from pathlib import Path

from tests.harness_e2e.rig import Harness, committed_events
from tests.harness_e2e.test_harness_jobs import (
    GOVERNOR_TOOLS,
    agent_events,
    contract,
    run,
    say,
    texts_from_plugin,
    write,
)
from tests.live import Live


def test_a_harness_agent_in_snapshot_mode_is_certified_without_a_shared_disk(
    harness: Harness, live: Live, tmp_path: Path, review_off: None
) -> None:
    laptop = tmp_path / "laptop"  # another machine's directory: under no workspace root
    laptop.mkdir()
    (laptop / "README.md").write_text("# the agent's project\n")
    assert not laptop.is_relative_to(live.workspace_root)
    harness.configure_plugin(workspace="snapshot")
    model, answer = run(harness, live, laptop, [
        {"tool": "reliability_begin", "arguments": contract()},
        write("hello world\n"), say("Done."),
        write("hello governor\n"), say("Done, repaired."),
        say("Certified: hello.txt says hello governor."),
    ])
    assert model.tool_names() >= GOVERNOR_TOOLS
    assert answer["workspace"] == {"kind": "snapshot", "path": ""}
    assert answer["state"] == "certified", answer
    assert [a["passed"] for a in answer["attempts"]] == [False, True]
    [log_path] = harness.session_logs()
    header, events = committed_events(log_path)
    assert header["cwd"] == str(laptop)
    steers = texts_from_plugin(events)
    assert steers[0].startswith("Completion is not verified yet: attempt 1/3 failed 1 of 1")
    assert "certified" in steers[1]
    # The trees judged are snapshots the plugin uploaded: the last one holds the repaired file.
    session = answer["id"]
    wrong, repaired = (attempt["tree"]["id"] for attempt in answer["attempts"])
    assert wrong != repaired
    with live.client() as agent:
        for tree, text in ((wrong, b"hello world\n"), (repaired, b"hello governor\n")):
            hello = agent.get(f"/sessions/{session}/trees/{tree}/files/hello.txt")
            assert hello.status_code == 200, hello.text
            assert hello.content == text
    sent = agent_events(live, session)
    assert [e["seq"] for e in sent] == [e["seq"] for e in events]
