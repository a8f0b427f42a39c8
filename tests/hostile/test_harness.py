"""The hostile-case harness itself: a case run in this process is stopped at its time limit (a hang cannot stall
the test run), and a case run as a real process reports that process's own exit status and streams."""
from __future__ import annotations

import pytest

from tests.hostile.conftest import SMALL, inp, out
from tests.hostile.harness import CaseTimeout
from tests.hostile.test_plugins_guarded import HEADER, RUNTIME_FAILURE


def test_a_hanging_case_in_process_is_stopped_at_its_time_limit(case):
    hang = "import time\n        while True:\n            time.sleep(0.01)"
    case.write("plugins/stuck.py", HEADER + RUNTIME_FAILURE.format(shape="pass", forward=hang))
    layers = "\n".join([inp(), '<layer name="f1" type="fragile"><input index="0" source="input"/></layer>', out("f1")])
    case.model("m.lnet", layers)
    with pytest.raises(CaseTimeout, match="did not finish in 2 s"):
        case.run("infer", "m.lnet", "-n", "1", "-b", "numpy", "--plugins", "plugins", timeout=2)
    assert case.expect(0, None, "check", "m.lnet", "--plugins", "plugins").rc == 0  # the alarm is off again


def test_a_real_process_gives_its_exit_status_and_streams(case):
    case.model("m.lnet", SMALL)
    ok = case.expect(0, None, "check", "m.lnet", process=True)
    bad = case.expect(2, ["no-such.lnet"], "check", "no-such.lnet", process=True)
    assert "error" not in ok.err
    assert bad.out == "" and len(bad.error_lines) == 1
