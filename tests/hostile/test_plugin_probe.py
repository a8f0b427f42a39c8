"""A plugin tried in a child process (``engine.plugin_probe``): one that ends the process (os._exit), loops forever
or crashes it (a segmentation fault) at import is told apart from one that merely raises and from a good one, and a
plugin's key changes when its file does. Qt-free."""
from __future__ import annotations

from engine.plugin_probe import probe_entry, probe_key
from tests.plugin_file import GOOD

HEADER = ("from engine.registry import PluginMeta\n"
          "PLUGIN = PluginMeta('{name}', '1.0', 'someone', 'a plugin')\n"
          "def register(r):\n    pass\n")
BAD = {
    "exits.py": "import os\nos._exit(3)\n",
    "loops.py": "while True:\n    pass\n",
    "crashes.py": "import ctypes\nctypes.string_at(0)\n",
}
PROBE_TIMEOUT = 4.0


def plant(folder):
    folder.mkdir()
    for name, code in BAD.items():
        (folder / name).write_text(HEADER.format(name=name[:-3]) + code)
    (folder / "good.py").write_text(GOOD)
    (folder / "raises.py").write_text(HEADER.format(name="raises") + "raise RuntimeError('no luck')\n")
    return folder


def test_the_probe_tells_crash_exit_hang_from_a_good_plugin(tmp_path):
    folder = plant(tmp_path / "plugins")
    results = {n: probe_entry(folder / n, PROBE_TIMEOUT) for n in [*BAD, "good.py"]}
    assert not results["exits.py"].ok and "exit status 3" in results["exits.py"].reason
    assert not results["loops.py"].ok and "did not finish loading within 4 s" in results["loops.py"].reason
    assert not results["crashes.py"].ok and "SIGSEGV" in results["crashes.py"].reason
    assert results["good.py"].ok and results["good.py"].collections == ("thirdparty",)
    assert all(results[n].fatal for n in BAD) and not results["good.py"].fatal
    res = probe_entry(folder / "raises.py", PROBE_TIMEOUT)
    assert not res.ok and not res.fatal and res.reason.startswith("RuntimeError: no luck")


def test_the_key_of_a_plugin_changes_with_its_file(tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text("x = 1\n")
    key = probe_key(plugin)
    assert probe_key(plugin) == key and str(plugin.resolve()) in key
    plugin.write_text("x = 22\n")
    assert probe_key(plugin) != key
