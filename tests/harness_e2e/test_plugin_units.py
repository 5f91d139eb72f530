"""The plugin's own tests (clients/harness/test, node's test runner) against a real governor,
fed the committed events of a log the real Harness wrote."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from governor.domain.harness import parse_log
from tests.harness_corpus import denormalised_text, restore_seq_and_time
from tests.harness_e2e.rig import PLUGIN, Harness
from tests.live import Live

RECORDED = "logs/dsh-0.1.0-rc.8/plugin-steer-repair/session.jsonl"


def test_the_plugin_unit_tests_pass_against_a_real_governor(
    harness_cache: Path, live: Live, review_off: None
) -> None:
    workspaces = live.workspace_root / "plugin-units"
    workspaces.mkdir()
    events = live.workspace_root / "plugin-units-events.json"
    events.write_text(json.dumps(restore_seq_and_time(parse_log(denormalised_text(RECORDED))[1])))
    delivering = live.workspace_root / "plugin-units-delivery"
    delivering.mkdir()
    live.manage("governor_project", "create", "plugin-delivery", "--review-mode", "off",
                "--workspace-root", str(delivering))
    live.manage("governor_project", "set", "plugin-delivery", "--delivery-review", "required")
    delivery_token = live.manage("governor_token", "create", "--project", "plugin-delivery",
                                 "--owner", "demo-agent").strip()
    harness = Harness(harness_cache, live.workspace_root)
    result = subprocess.run(  # noqa: S603
        ["node", "--test", "--test-reporter=tap"], cwd=PLUGIN, capture_output=True,
        text=True, timeout=300, check=False, env=harness.env(
            GOVERNOR_TEST_URL=live.url, GOVERNOR_TEST_TOKEN=live.token,
            GOVERNOR_TEST_WORKSPACES=str(workspaces), GOVERNOR_TEST_EVENTS=str(events),
            GOVERNOR_TEST_DELIVERY_TOKEN=delivery_token,
            GOVERNOR_TEST_DELIVERY_WORKSPACES=str(delivering)))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "# fail 0" in result.stdout and "# pass 14" in result.stdout, result.stdout[-3000:]
